"""Ctrl-C in process-group mode: rank 0's barrier, which rank 1 joins only seconds
later, ends with KeyboardInterrupt within half a second; the group still works."""

import os
import signal
import threading
import time

import numpy as np

import thd

thd.init_process_group(timeout=60)
rank = thd.get_rank()

if rank == 0:
    sent = []

    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.3, interrupt)
    timer.start()
    try:
        thd.barrier()
        raise AssertionError("the barrier finished before the interrupt")
    except KeyboardInterrupt:
        took = time.monotonic() - sent[0]
    timer.join()
    assert took < 0.5, f"barrier: KeyboardInterrupt {took:.3f} s after SIGINT"
    print(f"barrier interrupted in {took * 1000:.0f} ms")
else:
    time.sleep(3)
    thd.barrier()  # meets the barrier rank 0 left running

t = thd.from_numpy(np.full(4, rank + 1, np.float32))
thd.all_reduce(t)
np.testing.assert_array_equal(t.numpy(), np.full(4, 3, np.float32))
thd.destroy_process_group()
print(f"PASS pg_ctrl_c.py rank {rank}")
