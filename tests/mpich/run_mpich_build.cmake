# ctest driver (cmake -P) of mpich.build: configures thd against MPICH in a scratch
# tree (the mpi backend only: the other backends and CUDA are not what this checks)
# and compiles the mpi backend; with THD_TEST_MPICH_RUN=1 it also builds the
# quickstart and the process-group example and runs both under MPICH's launcher
# with --backend mpi. Variables (-D): SOURCE_ROOT, WORK_DIR, GENERATOR,
# MAKE_PROGRAM, CXX_COMPILER, CXX_LAUNCHER, MPICC, MPIRUN.
cmake_minimum_required(VERSION 3.25)

set(build ${WORK_DIR}/build)

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mpich.build: ${what} failed (${rc}); its files are in ${WORK_DIR}")
  endif()
endfunction()

set(launcher)
if(CXX_LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_LAUNCHER})
endif()
# Configured once; a re-run only rebuilds what changed.
step("configuring against MPICH" ${CMAKE_COMMAND}
     -S ${SOURCE_ROOT} -B ${build}
     -G ${GENERATOR} -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}
     -DCMAKE_CXX_COMPILER=${CXX_COMPILER} ${launcher}
     -DCMAKE_BUILD_TYPE=Release
     -DMPI_C_COMPILER=${MPICC}
     -DTHD_WITH_MPI=ON -DTHD_WITH_UCX=OFF -DTHD_WITH_LIBFABRIC=OFF -DTHD_WITH_CUDA=OFF -DTHD_WITH_NCCL=OFF
     -DTHD_BUILD_TESTS=OFF -DTHD_BUILD_BENCH=OFF -DTHD_BUILD_EXAMPLES=ON)

# The MPI the build found must be MPICH, not the system's default MPI.
file(STRINGS ${build}/CMakeCache.txt header_dir REGEX "^MPI_C_HEADER_DIR:")
if(NOT header_dir MATCHES "mpich")
  message(FATAL_ERROR "mpich.build: the configure step did not pick MPICH (${header_dir})")
endif()

# By default only what includes mpi.h is compiled against MPICH (a minute); the
# whole build and the MPICH runs take several more minutes on a 2-core machine, so
# they run when THD_TEST_MPICH_RUN=1 is set (docs/backends.md).
# The sources of the mpi backend's module (datachannel/mpi/).
set(mpi_sources mpi_host_collectives.cpp mpi_library.cpp mpi_pipe.cpp mpi_rendezvous.cpp mpi_wait.cpp registration.cpp)
set(objects)
foreach(src IN LISTS mpi_sources)
  list(APPEND objects datachannel/mpi/CMakeFiles/thd_backend_mpi.dir/${src}.o)
endforeach()
step("compiling the mpi backend against MPICH" ${CMAKE_COMMAND} -E chdir ${build} ${MAKE_PROGRAM} ${objects})
if(NOT "$ENV{THD_TEST_MPICH_RUN}" STREQUAL "1")
  message("mpich.build: the mpi backend compiles against MPICH "
          "(THD_TEST_MPICH_RUN=1 also builds the examples and runs them under mpirun.mpich)")
  return()
endif()

step("building against MPICH" ${CMAKE_COMMAND} --build ${build} --target example_quickstart
     example_process_group_allreduce)
step("mpirun.mpich -n 3 quickstart --backend mpi"
     ${CMAKE_COMMAND} -E env THD_LOG_LEVEL=warn
     ${MPIRUN} -n 3 ${build}/examples/quickstart --backend mpi)
step("mpirun.mpich -n 4 process_group_allreduce --backend mpi"
     ${MPIRUN} -n 4 ${build}/examples/process_group_allreduce --backend mpi)
message("mpich.build: the mpi backend builds and runs with MPICH")
