# ctest driver (cmake -P): installs the build tree into a scratch prefix, builds
# consumer/ against it with find_package(thd) and runs it. Any failed step fails
# the test. Variables (-D): BUILD_DIR, CONFIG, SOURCE_DIR (this folder), WORK_DIR,
# GENERATOR, MAKE_PROGRAM, CXX_COMPILER, CXX_LAUNCHER, VERSION, SHARED (whether
# libthd_tensor is a shared library), SANITIZE (the build's THD_SANITIZE: the
# consumer is built with the same sanitizers, whose runtime must come first).
cmake_minimum_required(VERSION 3.25)

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/consumer-build)
file(REMOVE_RECURSE ${WORK_DIR})

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (${rc}); "
                        "its files are left in ${WORK_DIR}")
  endif()
endfunction()

step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --config ${CONFIG}
     --prefix ${prefix})

# The build-only helpers are private to the shared libraries and must not be part
# of the exported package, and neither may fmt or OpenBLAS be in any target's link
# interface: consumers do not find_package them. (A static build exports them.)
file(GLOB targets_files ${prefix}/lib*/cmake/thd/thdTargets*.cmake)
if(NOT targets_files)
  message(FATAL_ERROR "install test: no thdTargets.cmake under ${prefix}")
endif()
if(SHARED)
  foreach(f IN LISTS targets_files)
    file(READ ${f} text)
    foreach(internal thd_warnings thd_build_flags thd_blas)
      string(FIND "${text}" "${internal}" pos)
      if(NOT pos EQUAL -1)
        message(FATAL_ERROR "install test: ${f} references the internal target ${internal}")
      endif()
    endforeach()
    string(REGEX MATCH "INTERFACE_LINK_LIBRARIES \"[^\"]*(fmt|PkgConfig|openblas)" leak "${text}")
    if(leak)
      message(FATAL_ERROR "install test: ${f} exports a private dependency: ${leak}")
    endif()
  endforeach()
endif()

set(launcher)
if(CXX_LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_LAUNCHER})
endif()
set(sanitize)
if(SANITIZE)
  set(sanitize -DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZE} -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE})
endif()
step("configuring the consumer" ${CMAKE_COMMAND}
     -S ${SOURCE_DIR}/consumer -B ${consumer_build}
     -G ${GENERATOR} -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}
     -DCMAKE_CXX_COMPILER=${CXX_COMPILER} ${launcher} ${sanitize}
     -DCMAKE_BUILD_TYPE=${CONFIG}
     -DCMAKE_PREFIX_PATH=${prefix}
     -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON
     -DTHD_EXPECTED_VERSION=${VERSION})
step("building the consumer" ${CMAKE_COMMAND} --build ${consumer_build} --config ${CONFIG})
step("running the consumer" ${consumer_build}/consumer)

file(REMOVE_RECURSE ${WORK_DIR})
