# ctest driver (cmake -P): installs the build tree into a scratch prefix and imports
# thd from the prefix's site-packages alone, running a local tensor through NumPy:
# the package's files are installed and its module finds libthd_* in the prefix.
# Variables (-D): BUILD_DIR, CONFIG, WORK_DIR, PYTHON, PACKAGE_DIR (relative to the
# prefix).
cmake_minimum_required(VERSION 3.25)

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --config ${CONFIG} --prefix ${prefix}
                OUTPUT_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "python install test: cmake --install failed (${rc})")
endif()
foreach(f __init__.py __init__.pyi errors.py py.typed)
  if(NOT EXISTS ${prefix}/${PACKAGE_DIR}/thd/${f})
    message(FATAL_ERROR "python install test: ${PACKAGE_DIR}/thd/${f} is not installed")
  endif()
endforeach()
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH PYTHONPATH=${prefix}/${PACKAGE_DIR} PYTHONNOUSERSITE=1
          ${PYTHON} -c "import sys, thd; assert thd.__file__.startswith(sys.argv[1]), thd.__file__; \
assert thd.tensor([1, 2]).numpy().tolist() == [1, 2]; print('imported', thd.__file__)" ${prefix}
  WORKING_DIRECTORY ${WORK_DIR}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "python install test: importing the installed thd failed (${rc})")
endif()
