"""The master releases the GIL while it waits: another Python thread keeps running
while synchronize() waits for work queued on the workers."""

import threading
import time

import thd

thd.init_master_worker(timeout=120)

ticks = []
stop = threading.Event()


def ticker():
    while not stop.is_set():
        ticks.append(time.monotonic())
        time.sleep(0.001)


thread = threading.Thread(target=ticker)
thread.start()

# Queue enough work that synchronize() waits a while (doubled until it does).
n = 256
for attempt in range(8):
    xs = [thd.randn(n, n, node=k) for k in range(thd.num_nodes())]
    thd.synchronize()
    for x in xs:
        for _ in range(20):
            x = x @ x
            x = x / x.max()
    start = time.monotonic()
    thd.synchronize()
    end = time.monotonic()
    if end - start >= 0.2:
        break
    n *= 2
else:
    raise AssertionError(f"synchronize never waited 0.2 s (last: {end - start:.3f} s at n={n})")
stop.set()
thread.join()

during = [t for t in ticks if start < t < end]
print(f"synchronize waited {end - start:.3f} s (n={n}); the other thread ran {len(during)} times meanwhile")
# Holding the GIL, the other thread could not run at all during the wait.
assert len(during) >= 10, len(during)
thd.shutdown()
print("PASS gil.py")
