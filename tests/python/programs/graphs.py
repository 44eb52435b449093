"""Graphs from Python (thdrun -n 3): capture, replay, inputs updated in place,
tensors made inside, sync points refused, a discarded capture, reset."""

import numpy as np

import thd

thd.init_master_worker()

x = thd.zeros(4)                      # node 0: an input
with thd.node(1):
    z = thd.zeros(4)                  # node 1: an output updated in place
with thd.graph() as g:
    x.add_(1.0)
    y = x * 2.0                       # made inside: the graph's
    z.copy_(y.to_node(1))
assert g.defined and g.num_ops == 5 and g.nodes == [0, 1], (g.num_ops, g.nodes)
assert x.numpy().tolist() == [0.0] * 4, "nothing runs during a capture"

for r in range(1, 4):
    g.replay()
    assert g.replays == r
    assert x.numpy().tolist() == [float(r)] * 4
    assert y.numpy().tolist() == [2.0 * r] * 4
    assert z.numpy().tolist() == [2.0 * r] * 4

x.fill_(10.0)                         # eager, between replays
g.replay()
assert np.array_equal(z.numpy(), np.full(4, 22.0, dtype=np.float32))
assert g.memory_bytes(0) == 16 and g.memory_bytes(1) == 16

# A sync point inside a capture raises at the call, naming it; the exception
# leaves the block, which discards the capture.
try:
    with thd.graph():
        (x + 1).numpy()
    raise AssertionError("numpy() inside a capture did not raise")
except thd.Error as e:
    assert "inside a graph capture" in str(e), str(e)
assert (x + 1).numpy().tolist() == [12.0] * 4

g.reset()
assert not g.defined
try:
    g.replay()
    raise AssertionError("an empty graph replayed")
except thd.ValueError:
    pass
thd.shutdown()
print("PASS graphs.py")
