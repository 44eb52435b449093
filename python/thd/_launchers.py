"""The `thdrun` and `thd-worker` commands of a pip-installed thd: the wheel carries
the two binaries in thd/bin, and pip's console scripts run them through here."""

import os
import sys


def _exec(name):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", name)
    if not os.access(path, os.X_OK):
        sys.exit(f"{name}: {path} is missing; this thd was not installed from a wheel (pip install); "
                 f"run the {name} of the build tree or of the install prefix instead")
    os.execv(path, [path] + sys.argv[1:])


def thdrun():
    _exec("thdrun")


def thd_worker():
    _exec("thd-worker")
