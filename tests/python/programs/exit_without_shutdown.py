"""A master that ends without thd.shutdown(): the atexit handler ends the session
and the workers exit cleanly (thdrun reports success only if every rank exits 0)."""

import thd

thd.init_master_worker(timeout=60)
x = thd.ones(4, node=1) * 3
assert x.sum().item() == 12.0
y = thd.ones(1000, 1000)  # still queued and alive at exit
y += 1
print("PASS exit_without_shutdown.py")
