# Required dependencies come from the system (scripts/install-deps), never vendored.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
# OpenSSL 3 for the connection handshake's HMAC-SHA256 (EVP_MAC) and nonces.
find_package(OpenSSL 3.0 REQUIRED COMPONENTS Crypto)

# OpenBLAS provides CBLAS for GEMM. Debian ships a pkg-config file; wrap it in one
# imported target so the rest of the build does not care how it was found.
pkg_check_modules(THD_OPENBLAS REQUIRED IMPORTED_TARGET openblas)
add_library(thd_blas INTERFACE)
target_link_libraries(thd_blas INTERFACE PkgConfig::THD_OPENBLAS)

# CUDA (see ThdOptions.cmake). The backends' dependencies are looked up in their
# folders (datachannel/<name>/CMakeLists.txt, docs/backends.md).
if(NOT THD_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
endif()
thd_resolve_option(THD_WITH_CUDA "${CUDAToolkit_FOUND}" "CUDA toolkit ${CUDAToolkit_VERSION}")

# The launcher names of the MPI found: Debian installs each MPI's launcher as
# mpirun.<impl> beside mpicc.<impl>, and plain mpirun follows the system's
# preferred MPI, so an MPI chosen by its compiler (-DMPI_C_COMPILER=mpicc.mpich)
# is given its own launcher first.
function(thd_mpirun_names out_var)
  get_filename_component(_mpicc_name "${MPI_C_COMPILER}" NAME)
  set(_names mpirun mpiexec)
  if(_mpicc_name MATCHES "^mpicc(\\..+)$")
    set(_names mpirun${CMAKE_MATCH_1} mpiexec${CMAKE_MATCH_1} ${_names})
  endif()
  set(${out_var} ${_names} PARENT_SCOPE)
endfunction()

# The environment of the tests mpirun launches: root (CI containers) must be
# allowed explicitly; more ranks than cores is the point.
set(THD_MPIRUN_TEST_ENV
  "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
# Under ASan, what Open MPI keeps until exit is allocated from components it has
# dlclose()d by then: the fast unwinder stops in them, so LeakSanitizer's reports
# lack the libmpi frames tests/sanitizers/lsan.supp names. The full unwinder (slow:
# only for the tests mpirun launches) keeps them. Appended to the options
# scripts/test --sanitize sets (scripts/lib/sanitizer_env.sh).
set(THD_MPIRUN_TEST_ENV_MODIFICATION "")
if(THD_SANITIZE MATCHES "address")
  set(THD_MPIRUN_TEST_ENV_MODIFICATION "ASAN_OPTIONS=string_append::fast_unwind_on_malloc=0")
endif()

# The Python package: Debian's interpreter (whose python3-numpy and python3-pytest
# the tests use) unless -DPython3_EXECUTABLE names another, and pybind11's own CMake
# package, which uses the Python3 found here. Sanitizer and fuzz builds leave it
# out: an instrumented module cannot be loaded into the uninstrumented interpreter.
if((THD_SANITIZE OR THD_BUILD_FUZZERS) AND NOT THD_WITH_PYTHON STREQUAL "OFF")
  string(TOUPPER "${THD_WITH_PYTHON}" _thd_python_value)
  if(_thd_python_value STREQUAL "ON")
    message(FATAL_ERROR "THD_WITH_PYTHON=ON cannot be combined with THD_SANITIZE or THD_BUILD_FUZZERS: the "
                        "instrumented module would not load into the interpreter. Configure with -DTHD_WITH_PYTHON=AUTO.")
  endif()
  set(THD_WITH_PYTHON OFF)  # this configure only: the cache keeps the user's choice
endif()
if(NOT THD_WITH_PYTHON STREQUAL "OFF")
  if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python3 QUIET COMPONENTS Interpreter Development.Module)
  if(Python3_FOUND)
    find_package(pybind11 CONFIG QUIET)
  endif()
endif()
set(_thd_python_found FALSE)
if(Python3_FOUND AND pybind11_FOUND)
  set(_thd_python_found TRUE)
endif()
# Not in config.h: no C++ code depends on it, and switching it then rebuilds nothing
# but the package.
thd_resolve_option(THD_WITH_PYTHON "${_thd_python_found}"
                   "Python ${Python3_VERSION} (${Python3_EXECUTABLE}), pybind11 ${pybind11_VERSION}")

# From here on THD_WITH_<X> reads as 0/1 (shadowing the AUTO/ON/OFF cache entry),
# which is what config.h.in's #cmakedefine01 and later if() tests want.
foreach(_opt CUDA PYTHON)
  set(THD_WITH_${_opt} ${THD_WITH_${_opt}_ENABLED})
endforeach()
