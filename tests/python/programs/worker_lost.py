"""A worker node that dies: operations on its node raise thd.WorkerLost naming it;
the other node keeps working. Rank 2 (node 1) kills itself while it serves: its
Python thread runs because the worker, too, serves with the GIL released."""

import os
import signal
import threading
import time

import thd

if os.environ["RANK"] == "2":
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
thd.init_master_worker(timeout=30)

on1 = thd.ones(3, node=1)
on0 = thd.ones(3, node=0)
assert on1.sum().item() == 3.0
deadline = time.monotonic() + 20
while True:  # until the master notices node 1 is gone
    try:
        (on1 * 2).sum().item()
    except thd.WorkerLost as e:
        lost = e
        break
    assert time.monotonic() < deadline, "node 1 was never reported lost"
    time.sleep(0.1)
assert isinstance(lost, thd.PeerLost) and isinstance(lost, ConnectionError)
assert lost.node == 1, (lost.node, str(lost))
try:
    thd.zeros(2, node=1).get()
except thd.WorkerLost as e:
    assert e.node == 1
else:
    raise AssertionError("a new tensor on the lost node did not raise WorkerLost")
assert (on0 + 1).tolist() == [2.0, 2.0, 2.0]
try:
    thd.shutdown()
except thd.WorkerLost:
    pass
print("PASS worker_lost.py")
