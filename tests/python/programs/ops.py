"""A master-worker job (thdrun -n 3: nodes 0 and 1): creation, arithmetic, views,
reductions, comparisons and moves between nodes, checked against NumPy."""

import datetime
import os

import numpy as np

import thd

thd.init_master_worker(timeout=datetime.timedelta(seconds=60))
assert int(os.environ["RANK"]) == 0, "only the master returns from init_master_worker"
assert thd.is_master() and thd.num_nodes() == 2


def same(t, expected):
    got = t.numpy()
    assert got.shape == np.shape(expected), (got.shape, np.shape(expected))
    np.testing.assert_allclose(got, expected, rtol=1e-5)


# ---- creation on each node ----
a = thd.arange(6, dtype=thd.float32).view(2, 3)
with thd.node(1):
    assert thd.current_node() == 1
    b = thd.full((2, 3), 2.0)
    c = thd.ones(2, 3, dtype=np.float64)
assert thd.current_node() == 0
assert (a.node, b.node, c.node) == (0, 1, 1)
assert a.shape == (2, 3) and a.dtype == thd.float32 and c.dtype == thd.float64
assert thd.zeros(4, node=1).node == 1
assert thd.zeros((2, 2)).tolist() == [[0.0, 0.0], [0.0, 0.0]]
assert thd.arange(1, 7, 2).tolist() == [1, 3, 5] and thd.arange(3).dtype == thd.int64
assert thd.arange(0.0, 1.0, 0.5).dtype == thd.float32
assert thd.FloatTensor(20, 20).dtype == thd.float32 and thd.FloatTensor(20, 20).shape == (20, 20)
assert thd.DoubleTensor(3).dtype == thd.float64
assert thd.LongTensor(2, 2, node=1).dtype == thd.int64 and thd.LongTensor(2, 2, node=1).node == 1
assert thd.IntTensor(5).dtype == thd.int32
assert thd.empty(3, 4).shape == (3, 4)

# ---- arithmetic on several nodes ----
an = np.arange(6, dtype=np.float32).reshape(2, 3)
b0 = b.to_node(0)
assert b0.node == 0 and b.to_node(1) is not None
same(a + b0, an + 2)
same(a - b0, an - 2)
same(a * b0, an * 2)
same(a / b0, an / 2)
same(a + 1, an + 1)
same(1 + a, an + 1)
same(10 - a, 10 - an)
same(a * 3, an * 3)
same(3 * a, an * 3)
same(a / 4, an / 4)
same(12 / (a + 1), 12 / (an + 1))
same(-a, -an)
same(a @ a.t(), an @ an.T)
same(a.matmul(a.transpose(0, 1)), an @ an.T)
bn = np.full((2, 3), 2.0)
same(b * c, bn * 1.0)  # on node 1: float32 * float64 is float64
assert (b * c).dtype == thd.float64 and (b * c).node == 1
assert (thd.arange(4) * 2).dtype == thd.int64
assert (thd.arange(4) * 2.5).dtype == thd.float32
assert (thd.arange(4) * np.int64(2)).tolist() == [0, 2, 4, 6]
assert (thd.arange(4, dtype=thd.float64) * np.float32(0.5)).tolist() == [0.0, 0.5, 1.0, 1.5]

# ---- in place ----
d = thd.zeros(2, 3)
d_before = d
d += a
d -= 1
d *= 2
d /= 4
assert d is d_before
same(d, (an - 1) * 2 / 4)
e = thd.ones(2, 3, node=1)
e += b
e.add_(1).add_(c.to(thd.float32))
same(e, np.full((2, 3), 5.0))
assert e.fill_(7).sum().item() == 42.0

# ---- comparisons ----
assert (a == 2).tolist() == [[False, False, True], [False, False, False]]
assert (a != 2).dtype == thd.bool
assert (a < 2).numpy().sum() == 2 and (a <= 2).numpy().sum() == 3
assert (a > 2).numpy().sum() == 3 and (a >= b0).numpy().sum() == 4
assert (a == a).numpy().all()
assert bool(thd.ones(1)) and not bool(thd.zeros(1, 1, node=1)) and bool(a.sum() == 15)
try:
    bool(a == a)
except thd.ValueError as e:
    assert "ambiguous" in str(e) and e.op == "bool"
else:
    raise AssertionError("bool() of a 6-element tensor did not raise")

# ---- reductions ----
assert a.sum().item() == 15.0 and a.sum().shape == ()
same(a.sum(0), an.sum(0))
same(a.sum(dim=1, keepdim=True), an.sum(1, keepdims=True))
same(a.sum((0, 1)), an.sum())
assert a.mean().item() == 2.5
same(a.mean(1), an.mean(1))
assert a.max().item() == 5.0 and a.min().item() == 0.0
# max/min over one dim: (values, indices) as torch.return_types; a rows-of-two result
# must not unpack into its rows.
values, indices = a.max(0)
same(values, an.max(0))
same(indices, an.argmax(0))
m = a.min(dim=1)
same(m.values, an.min(1))
same(m.indices, an.argmin(1))
assert type(m).__name__ == "min" and type(m) is thd.return_types.min
ties = thd.from_numpy(np.array([[3.0, 1.0, 3.0], [2.0, 2.0, 0.0]], np.float32)).dist_send()
same(ties.max(1, keepdim=True).indices, [[0], [0]])  # the first of equal values, as torch
same(a.amax((0, 1)), an.max())
same(a.amin(1, keepdim=True), an.min(1, keepdims=True))
same(a.amax(), an.max())
same(a.max(thd.full((2, 3), 2.5)), np.maximum(an, 2.5))
try:
    a.max((0, 1))
    raise AssertionError("max over several dims must ask for amax")
except TypeError as e:
    assert "amax" in str(e), e
assert isinstance(thd.arange(5).sum().item(), int)
# Subtraction refuses bool operands at the call site, as torch does.
mask = thd.ones(3, dtype=thd.bool)
for bad in (lambda: mask - thd.ones(3, dtype=thd.int64), lambda: 1 - mask, lambda: mask - mask):
    try:
        bad()
        raise AssertionError("subtracting a bool tensor must raise")
    except thd.TypeError as e:
        assert "bool" in str(e), e

# ---- views ----
same(a.view(3, 2), an.reshape(3, 2))
same(a.view(-1), an.reshape(-1))
same(a.t().reshape(6), an.T.reshape(6))
same(a.transpose(0, 1).contiguous(), an.T)
assert a.size() == (2, 3) and a.size(1) == 3 and a.dim() == 2 and a.numel() == 6 and len(a) == 2

# ---- uploads and downloads ----
x = np.random.default_rng(5).standard_normal((4, 5)).astype(np.float32)
on1 = thd.from_numpy(x).dist_send(node=1)
assert on1.node == 1 and on1.shape == (4, 5)
np.testing.assert_array_equal(on1.numpy(), x)
local = on1.get()
assert isinstance(local, thd.Tensor)
np.testing.assert_array_equal(local.numpy(), x)
with thd.node(1):
    assert thd.tensor([1, 2, 3]).dist_send().node == 1
ints = thd.tensor([[1, 2], [3, 4]], dtype=thd.int32).dist_send()
assert ints.node == 0 and ints.dtype == thd.int32 and ints.tolist() == [[1, 2], [3, 4]]
moved = on1.to_node(0)
assert moved.node == 0
np.testing.assert_array_equal(moved.numpy(), x)
assert thd.full((1,), 3).item() == 3.0

# ---- random numbers: reproducible per seed and node ----
thd.manual_seed_all(1234)
r1 = thd.rand(3, 3, node=1).numpy()
g1 = thd.randn(100).numpy()
thd.manual_seed_all(1234)
np.testing.assert_array_equal(thd.rand(3, 3, node=1).numpy(), r1)
np.testing.assert_array_equal(thd.randn(100).numpy(), g1)
assert ((r1 >= 0) & (r1 < 1)).all() and abs(g1.mean()) < 0.5

assert "DistributedTensor(node=1" in repr(on1)
thd.synchronize()
thd.shutdown()
assert not thd.is_master()
print("PASS ops.py")
