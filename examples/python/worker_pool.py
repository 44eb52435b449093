"""A worker pool outlives its masters: this program attaches to a pool twice in a
row, as two masters one after the other would. Each session puts tensors on every
node, computes, checks the results and detaches; each starts with nothing of the
one before left on the workers (the pool frees every tensor of a session when its
master detaches or dies).

    thdrun --pool -n 2 python3 examples/python/worker_pool.py   # a pool, this program, then no pool

or against a pool started on its own (docs/worker_pool.md):

    thdrun --pool -n 2 --listen 127.0.0.1:29600
    THD_AUTH_TOKEN_FILE=/tmp/thdrun-Ab12Cd/token python3 examples/python/worker_pool.py tcp://127.0.0.1:29600

(with PYTHONPATH=build/python in a build tree). Every line prints a value computed
on the workers next to the value expected; the program exits 1 if any differ.
"""

import os
import sys

import numpy as np

import thd

all_ok = True


def report(what, got, expected):
    global all_ok
    ok = abs(got - expected) <= 1e-6 * (1.0 + abs(expected))
    all_ok = all_ok and ok
    print(f"  {what:<44} = {got:g} (expected {expected:g}){'' if ok else '  <-- WRONG'}")


def one_session(pool, round):
    # No rank and no RANK in the environment: a tcp:// address then names a pool,
    # and this program is its master until shutdown().
    thd.init_master_worker(init_method=pool, timeout=60)
    nodes = thd.num_nodes()
    print(f"session {round}: attached to {pool} ({nodes} nodes)")
    report("tensors left on the workers from before", sum(s["live_tensors"] for s in thd.stats()), 0)

    # On node k: arange(10) * (k + 1) + round, made where it lives.
    parts = []
    for k in range(nodes):
        with thd.node(k):
            parts.append(thd.arange(10, dtype=thd.float32) * (k + 1) + round)
    # Summed across the nodes by the workers themselves.
    thd.all_reduce(parts, op=thd.ReduceOp.SUM)
    weights = nodes * (nodes + 1) / 2  # the sum of (k + 1)
    total = parts[-1].get().numpy()  # a sync point: the bytes come back
    report("all_reduce(parts)[9]", float(total[9]), 9 * weights + nodes * round)
    report("sum of all_reduce(parts)", float(total.sum()), 45 * weights + 10 * nodes * round)

    # A NumPy array uploaded to node 0 and combined there.
    v = thd.from_numpy(np.full(10, 0.5, dtype=np.float32)).dist_send(0)
    report("(parts[0] * 0.5).sum() on node 0", (parts[0] * v).sum().item(), 0.5 * (45 * weights + 10 * nodes * round))

    # Detaching while `parts` still holds tensors: the pool frees them.
    thd.shutdown()


def main():
    pool = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("THD_POOL_URL", "")
    if not pool:
        print("usage: worker_pool.py tcp://HOST:PORT (or THD_POOL_URL set, as thdrun --pool does)", file=sys.stderr)
        return 2
    one_session(pool, 1)
    one_session(pool, 2)
    print(f"\nworker_pool: {'OK' if all_ok else 'FAILED'}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
