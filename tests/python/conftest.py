"""Shared helpers of the Python package's tests.

Master-worker jobs run as `thdrun -n N python3 programs/<name>.py`: thdrun picks a
free port, starts the ranks (rank 0 the master, the others serve as workers) and
reaps them. ctest sets THD_THDRUN and PYTHONPATH (tests/python/CMakeLists.txt).
"""

import os
import pathlib
import subprocess
import sys

import pytest

PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs"


def thdrun_path():
    path = os.environ.get("THD_THDRUN")
    if path:
        return path
    # PYTHONPATH=build/python: thdrun is build/bin/thdrun.
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        candidate = pathlib.Path(entry).resolve().parent / "bin" / "thdrun"
        if entry and candidate.exists():
            return str(candidate)
    pytest.fail("THD_THDRUN is not set and no thdrun was found beside PYTHONPATH's build/python")


def run_job(program, nproc=3, timeout=120, args=()):
    """Runs programs/<program> on `nproc` ranks; returns the CompletedProcess."""
    cmd = [thdrun_path(), "-n", str(nproc), "--timeout-kill", "2", sys.executable, str(PROGRAMS / program), *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{program} ran past {timeout} s\nstdout:\n{e.stdout}\nstderr:\n{e.stderr}")


def check_job(program, nproc=3, timeout=120):
    """Runs the program and checks that every rank exited 0 and the master printed
    'PASS <program>'; returns its stdout."""
    p = run_job(program, nproc=nproc, timeout=timeout)
    report = f"exit status {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert p.returncode == 0, report
    assert f"PASS {program}" in p.stdout, report
    return p.stdout
