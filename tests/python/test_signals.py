"""Ctrl-C: SIGINT is Python's after `import thd`, and it ends thd's waits."""

import subprocess
import sys

from conftest import check_job

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
