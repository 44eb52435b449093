"""Process-group mode from Python: programs/process_group.py runs on 4 ranks (thdrun
over tcp; mpirun over the mpi backend when both are there) and checks every
collective's values, a subgroup, async Work, object collectives and the errors;
each rank prints its own PASS line. The names shared with master-worker mode keep
its semantics on lists of DistributedTensor."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import PROGRAMS, check_job, run_job

import thd


def check_every_rank_passed(p, nproc=4):
    report = f"exit status {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert p.returncode == 0, report
    for rank in range(nproc):
        assert f"PASS process_group.py rank {rank}" in p.stdout, report


def test_every_collective_over_tcp():
    check_every_rank_passed(run_job("process_group.py", nproc=4))


def test_every_collective_over_mpi():
    mpirun = shutil.which("mpirun")
    if mpirun is None or not thd.is_mpi_available():
        pytest.skip("needs mpirun and thd built with the mpi backend")
    env = dict(os.environ, PYTHONUNBUFFERED="1", THD_BACKEND="mpi", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    cmd = [mpirun, "-n", "4", sys.executable, str(PROGRAMS / "process_group.py")]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"mpirun ran past 180 s\nstdout:\n{e.stdout}\nstderr:\n{e.stderr}")
    check_every_rank_passed(p)


@pytest.mark.parametrize("backend", ["tcp", "ucx", "libfabric"])
def test_a_mismatched_collective_fails_every_rank_at_once(backend, monkeypatch):
    if not thd.is_backend_available(backend):
        pytest.skip(f"thd built without the {backend} backend")
    monkeypatch.setenv("THD_BACKEND", backend)
    if backend == "libfabric":
        monkeypatch.setenv("FI_PROVIDER", "tcp")
    p = run_job("pg_mismatch.py", nproc=3)
    report = f"exit status {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert p.returncode == 0, report
    for rank in range(3):
        assert f"PASS pg_mismatch.py rank {rank}" in p.stdout, report


def test_the_shared_names_keep_master_worker_semantics():
    check_job("process_group_names_in_master_worker.py")


def test_calls_before_init_process_group_raise_value_error():
    assert not thd.is_initialized()
    for call in (thd.get_rank, thd.get_world_size, thd.get_backend, thd.barrier, lambda: thd.new_group([0])):
        with pytest.raises(thd.ValueError, match="not initialized"):
            call()


def test_bad_arguments_are_refused_before_the_rendezvous():
    with pytest.raises(thd.TypeError, match="timeout"):
        thd.init_process_group(timeout="soon")
    with pytest.raises(thd.ValueError, match="timeout must be positive"):
        thd.init_process_group(timeout=-1)
    with pytest.raises(thd.NotImplementedError, match="store"):
        thd.init_process_group(store=object())
    with pytest.raises(thd.ValueError, match="backend 'gloo' is not in this build"):
        thd.init_process_group(backend="gloo", init_method="tcp://127.0.0.1:1", world_size=1, rank=0)
    assert not thd.is_initialized()


def test_every_public_name_has_a_docstring():
    for name in thd._process_group.__all__:
        assert getattr(thd, name).__doc__, name
    assert thd.Work.wait.__doc__ and thd.Work.exception.__doc__
