# ctest driver (cmake -P): `pip install` of the source tree into a fresh virtual
# environment, offline, through the in-tree build backend (pyproject.toml), reusing
# this build tree (THD_PIP_BUILD_DIR); then, from another directory and without
# PYTHONPATH, imports thd from the environment (its libthd_* from the wheel, not from
# the build tree) and runs the quickstart under the environment's own thdrun; and makes
# an sdist with the backend.
# Variables (-D): SOURCE_DIR, BUILD_DIR, WORK_DIR, PYTHON.
cmake_minimum_required(VERSION 3.25)

set(venv ${WORK_DIR}/venv)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run what)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=PYTHONPATH --unset=LD_LIBRARY_PATH --unset=THD_BACKEND
                          PYTHONNOUSERSITE=1 PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 ${ARGN}
                  WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pip install test: ${what} failed (${rc})")
  endif()
endfunction()

run("creating a virtual environment (python3-venv)" ${PYTHON} -m venv --system-site-packages ${venv})
run("pip install (python3-pip)" THD_PIP_BUILD_DIR=${BUILD_DIR}
    ${venv}/bin/python -m pip install --no-build-isolation --no-index --no-cache-dir ${SOURCE_DIR})
run("importing the installed thd" ${venv}/bin/python -c [[
import sys, thd
venv = sys.argv[1]
assert thd.__file__.startswith(venv), thd.__file__
maps = open("/proc/self/maps").read().splitlines()
libs = sorted({line.split()[-1] for line in maps if "libthd_" in line})
assert libs and all(p.startswith(venv) for p in libs), libs
assert thd.from_numpy(__import__("numpy").arange(3.0)).numpy().tolist() == [0.0, 1.0, 2.0]
print("imported", thd.__file__, "with", len(libs), "libthd_* of the wheel")
]] ${venv})
run("the quickstart under the installed thdrun" PATH=${venv}/bin:$ENV{PATH}
    ${venv}/bin/thdrun -n 3 ${venv}/bin/python ${SOURCE_DIR}/examples/python/quickstart.py)
# The backend's sdist: the tracked files under thd-<version>/, with a PKG-INFO.
run("the backend's build_sdist" ${PYTHON} -B -c [[
import sys, tarfile
sys.path.insert(0, sys.argv[1] + "/python/build_backend")
import thd_build
name = thd_build.build_sdist(sys.argv[2])
root = name[:-len(".tar.gz")]
names = set(tarfile.open(sys.argv[2] + "/" + name).getnames())
for f in ("pyproject.toml", "CMakeLists.txt", "python/build_backend/thd_build.py", "python/src/module.cpp", "PKG-INFO"):
    assert f"{root}/{f}" in names, f
print("sdist", name, len(names), "files")
]] ${SOURCE_DIR} ${WORK_DIR})
file(REMOVE_RECURSE ${WORK_DIR})
