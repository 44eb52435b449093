"""Ctrl-C while the master waits: the wait ends with KeyboardInterrupt within half a
second, and the session stays usable and shuts down cleanly."""

import os
import signal
import threading
import time

import numpy as np

import thd

thd.init_master_worker(timeout=120)
LIMIT = 0.5


def queue_work(seconds):
    """Queues matrix products on node 0 until they take about `seconds` to run."""
    x = thd.randn(512, 512, node=0)
    thd.synchronize()
    start = time.monotonic()
    batches = 0
    while time.monotonic() - start < 0.2:
        for _ in range(4):
            x = x @ x
            x = x / x.abs().max()
        thd.synchronize()
        batches += 1
    per_batch = (time.monotonic() - start) / batches
    for _ in range(int(seconds / per_batch) + 1):
        for _ in range(4):
            x = x @ x
            x = x / x.abs().max()
    return x


def interrupted_after(delay, wait):
    """Runs wait() with a SIGINT sent to this process after `delay` seconds; returns
    how long after the signal KeyboardInterrupt was raised."""
    sent = []

    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(delay, interrupt)
    timer.start()
    try:
        wait()
    except KeyboardInterrupt:
        return time.monotonic() - sent[0]
    finally:
        timer.join()
    raise AssertionError("the wait finished before the interrupt: queue more work")


# synchronize() behind seconds of queued work.
queue_work(4.0)
took = interrupted_after(0.3, thd.synchronize)
assert took < LIMIT, f"synchronize: KeyboardInterrupt {took:.3f} s after SIGINT"
print(f"synchronize interrupted in {took * 1000:.0f} ms")

# get() of a result behind queued work.
y = queue_work(4.0)
took = interrupted_after(0.3, y.get)
assert took < LIMIT, f"get: KeyboardInterrupt {took:.3f} s after SIGINT"
print(f"get interrupted in {took * 1000:.0f} ms")

# An event's synchronize on a side stream.
s = thd.Stream(node=0)
with thd.stream(s):
    queue_work(4.0)
    e = thd.Event()
    e.record()
took = interrupted_after(0.3, e.synchronize)
assert took < LIMIT, f"Event.synchronize: KeyboardInterrupt {took:.3f} s after SIGINT"
print(f"Event.synchronize interrupted in {took * 1000:.0f} ms")

# The session still works: the queued work finishes and new results are right.
thd.synchronize()
z = thd.ones(3, node=1) + 1
np.testing.assert_array_equal(z.get().numpy(), np.full(3, 2, np.float32))
thd.shutdown()
print("PASS ctrl_c.py")
