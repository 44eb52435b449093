"""Process-group mode, 3 ranks: rank 1 calls broadcast while ranks 0 and 2 call
all_reduce, with a group timeout of 30 s. Every rank must fail within 2 s with a
ValueError naming both calls from its own side, and the all_reduce after it must
work everywhere. Each rank prints 'PASS pg_mismatch.py rank <r>'."""

import time

import numpy as np

import thd

thd.init_process_group(timeout=30)
r = thd.get_rank()
a = np.ones(4, dtype=np.float32)
broadcast = "broadcast(float32, 4 elements, root 0)"
all_reduce = "all_reduce(float32, 4 elements, sum)"
mine, theirs = (broadcast, all_reduce) if r == 1 else (all_reduce, broadcast)
start = time.monotonic()
try:
    thd.broadcast(a, 0) if r == 1 else thd.all_reduce(a)
    raise AssertionError(f"rank {r}: the mismatched collective succeeded")
except ValueError as e:
    took = time.monotonic() - start
    assert f"called {theirs} while this rank called {mine}" in str(e), f"rank {r}: {e}"
    assert took < 2, f"rank {r}: failed after {took:.1f} s with a 30 s timeout: {e}"
b = np.full(2, float(r), dtype=np.float32)
thd.all_reduce(b)
assert np.allclose(b, 3.0), f"rank {r}: {b}"
thd.destroy_process_group()
print(f"PASS pg_mismatch.py rank {r}", flush=True)
