"""Ctrl-C: SIGINT is Python's after `import thd`, and it ends thd's waits."""

import subprocess
import sys

from conftest import check_job, run_job

SIGINT_AFTER_IMPORT = """
import os, signal, time
import thd
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
    print("no interrupt")
except KeyboardInterrupt:
    print("KeyboardInterrupt")
"""


def test_sigint_raises_keyboard_interrupt_after_import():
    # Loading the backends' libraries must not leave SIGINT at the default action,
    # which kills the interpreter instead.
    p = subprocess.run([sys.executable, "-c", SIGINT_AFTER_IMPORT], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"exit status {p.returncode}\n{p.stderr}"
    assert p.stdout.strip() == "KeyboardInterrupt"


def test_ctrl_c_ends_synchronize_get_and_event_waits_within_half_a_second():
    out = check_job("ctrl_c.py", timeout=240)
    assert "synchronize interrupted" in out


def test_ctrl_c_ends_a_process_group_wait_and_the_group_still_works():
    p = run_job("pg_ctrl_c.py", nproc=2, timeout=120)
    report = f"exit status {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert p.returncode == 0, report
    assert "barrier interrupted" in p.stdout, report
    for rank in range(2):
        assert f"PASS pg_ctrl_c.py rank {rank}" in p.stdout, report
