"""Master-worker jobs from Python: each test runs one program of programs/ as
`thdrun -n 3 python3 <program>` (the master and two worker nodes) and checks that
every rank exited 0 and the master's checks passed."""

from conftest import check_job, run_job


def test_ops_on_several_nodes_match_numpy():
    check_job("ops.py")


def test_the_rest_of_the_ops_match_numpy():
    check_job("more_ops.py")


def test_collectives_from_the_master_and_stats():
    check_job("collectives.py")


def test_streams_and_events():
    check_job("streams.py")


def test_errors_raise_at_the_call_site_and_remote_errors_at_the_sync_point():
    check_job("errors.py")


def test_the_gil_is_released_while_the_master_waits():
    out = check_job("gil.py", timeout=240)
    assert "the other thread ran" in out


def test_threads_issue_ops_at_once():
    check_job("threads.py")


def test_shutdown_ends_the_session_and_the_workers():
    check_job("shutdown.py")


def test_a_master_that_exits_without_shutdown_still_ends_the_job():
    check_job("exit_without_shutdown.py")


def test_a_lost_worker_raises_worker_lost_naming_its_node():
    check_job("worker_lost.py")


def test_a_failed_check_fails_the_job():
    # The harness itself: a master whose assertion fails makes thdrun fail.
    p = run_job("failing.py")
    assert p.returncode != 0
    assert "AssertionError: deliberately" in p.stderr


def test_devices_with_torch_names():
    check_job("devices.py")


def test_arithmetic_takes_a_tensor_or_a_number_and_in_place_ops_return_self():
    check_job("operands.py", nproc=2)


def test_torch_tensor_parity_methods_and_local_operands_refused_by_name():
    check_job("torch_parity.py")
