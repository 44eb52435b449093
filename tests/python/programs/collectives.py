"""Collectives issued by the master over tensors on both nodes (thdrun -n 3), and
thd.stats(), checked against NumPy."""

import datetime

import numpy as np

import thd

thd.init_master_worker(timeout=datetime.timedelta(seconds=60))
nodes = thd.num_nodes()
assert nodes == 2


def per_node(make):
    out = []
    for n in range(nodes):
        with thd.node(n):
            out.append(make(n))
    return out


def same(t, expected):
    np.testing.assert_allclose(t.numpy(), expected, rtol=1e-6)


# all_reduce in place, with torch's op names; the handles keep the remote tensors.
grads = per_node(lambda n: thd.full((4,), float(n + 1)))
thd.all_reduce(grads)
for g in grads:
    same(g, np.full(4, 3.0))
maxes = per_node(lambda n: thd.arange(4, dtype=thd.float32) * float(n + 1))
thd.all_reduce(maxes, op=thd.ReduceOp.MAX)
same(maxes[0], np.arange(4) * 2.0)
averaged = per_node(lambda n: thd.full((2,), float(2 * n)))
thd.all_reduce(averaged, thd.ReduceOp.AVG)
same(averaged[1], np.full(2, 1.0))

# float16 works too (sums accumulate in float32 on the workers).
halves = per_node(lambda n: thd.full((2,), 0.5 + n, dtype=thd.float16))
thd.all_reduce(halves)
same(halves[1], np.full(2, 2.0))

# broadcast and reduce by the index in the list.
b = per_node(lambda n: thd.full((3,), float(10 + n)))
thd.broadcast(b, 1)
same(b[0], np.full(3, 11.0))
r = per_node(lambda n: thd.full((3,), float(n + 2)))
thd.reduce(r, 0, thd.ReduceOp.PRODUCT)
same(r[0], np.full(3, 6.0))
same(r[1], np.full(3, 3.0))
# A negative root index is an IndexError that says so.
for call in (lambda: thd.broadcast(b, -1), lambda: thd.reduce(r, -2)):
    try:
        call()
        raise AssertionError("a negative root index was taken")
    except thd.IndexError as e:
        assert "is negative" in str(e), str(e)

# all_gather and reduce_scatter return new tensors on the inputs' nodes.
gathered = thd.all_gather(per_node(lambda n: thd.full((2,), float(n))))
assert [g.node for g in gathered] == [0, 1]
same(gathered[1], np.array([[0.0, 0.0], [1.0, 1.0]]))
scattered = thd.reduce_scatter(per_node(lambda n: thd.arange(4, dtype=thd.float32) + float(n)))
same(scattered[0], np.array([1.0, 3.0]))
same(scattered[1], np.array([5.0, 7.0]))

# Bad calls raise at the call site, naming what was wrong.
try:
    thd.all_reduce([grads[0], grads[0]])
    raise AssertionError("two tensors on one node were accepted")
except thd.ValueError as e:
    assert "both on node 0" in str(e), e

stats = thd.stats()
assert [s["node"] for s in stats] == [0, 1]
assert stats[0]["backend"] == thd.backend_name() == "tcp"
assert stats[1]["ops_executed"] > 0 and stats[0]["streams"][0]["stream"] == 0

thd.shutdown()
print("PASS collectives.py")
