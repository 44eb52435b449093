"""The rest of DistributedTensor's ops (thdrun -n 3), each checked against NumPy:
math, reductions, linear algebra, indexing and views, joining and sorting."""

import datetime

import numpy as np

import thd

thd.init_master_worker(timeout=datetime.timedelta(seconds=60))


def same(t, expected, rtol=1e-5):
    got = t.numpy()
    assert got.shape == np.shape(expected), (got.shape, np.shape(expected))
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=1e-6)


a_np = np.arange(12, dtype=np.float32).reshape(3, 4) / 4.0 - 1.0
with thd.node(1):
    a = thd.tensor(a_np).dist_send()
    b = thd.full((3, 4), 2.0)
    assert a.node == 1

# ---- math ----
same(a ** 2, a_np ** 2)
same(b.pow(a), 2.0 ** a_np)
same(a.maximum(b * 0.0), np.maximum(a_np, 0))
same(a.minimum(b * 0.0), np.minimum(a_np, 0))
same(a.abs(), np.abs(a_np))
same(abs(a), np.abs(a_np))
same(a.exp(), np.exp(a_np))
same((a.abs() + 1).log(), np.log(np.abs(a_np) + 1))
same((a.abs() + 1).sqrt(), np.sqrt(np.abs(a_np) + 1))
same(a.sin(), np.sin(a_np))
same(a.tanh(), np.tanh(a_np))
same(a.sigmoid(), 1 / (1 + np.exp(-a_np)))
same(a.relu(), np.maximum(a_np, 0))
same(a.clamp(min=-0.5, max=0.5), np.clip(a_np, -0.5, 0.5))
same(a.clamp(max=0.0), np.minimum(a_np, 0.0))
c = a.clone()
c.sub_(1.0).mul_(2.0).div_(b)
same(c, (a_np - 1.0) * 2.0 / 2.0)
c.copy_(b)
same(c, np.full((3, 4), 2.0))
c.neg_().exp_()
same(c, np.exp(np.full((3, 4), -2.0)))

# ---- reductions ----
same(a.prod(dim=1), a_np.prod(axis=1))
assert a.argmax().item() == int(np.argmax(a_np))
same(a.argmin(dim=0), np.argmin(a_np, axis=0))
same(a.var(), np.var(a_np, ddof=1))
same(a.std(dim=1, correction=0), np.std(a_np, axis=1))
same(a.norm(), np.linalg.norm(a_np))
assert bool((a > 1.5).any().item()) and not bool((a > 5).all().item())
sm = a.softmax(dim=1).numpy()
np.testing.assert_allclose(sm.sum(axis=1), np.ones(3), rtol=1e-5)
same(a.log_softmax(dim=1), np.log(sm), rtol=1e-4)

# ---- linear algebra ----
m = a.t().contiguous()
same(a.mm(m), a_np @ a_np.T)
same(a.reshape(1, 3, 4).bmm(m.reshape(1, 4, 3)), (a_np @ a_np.T)[None])
same(b[:, :3].addmm(a, m, beta=0.5, alpha=2.0), 0.5 * 2.0 + 2.0 * (a_np @ a_np.T))
v = a[0]
same(v.dot(v), a_np[0] @ a_np[0])
same(v.outer(v), np.outer(a_np[0], a_np[0]))

# ---- indexing and views ----
same(a[1], a_np[1])
same(a[:, 1], a_np[:, 1])
same(a[1:, ::2], a_np[1:, ::2])
same(a[-1, -2], a_np[-1, -2])
same(a[..., 1:3], a_np[..., 1:3])
same(a[None, 0], a_np[None, 0])
same(a.flatten(), a_np.flatten())
same(a.reshape(3, 2, 2).permute(2, 0, 1), a_np.reshape(3, 2, 2).transpose(2, 0, 1))
same(a.narrow(1, 1, 2), a_np[:, 1:3])
same(a.select(0, 2), a_np[2])
same(a[0].unsqueeze(0).expand(3, 4), np.broadcast_to(a_np[0], (3, 4)))
same(a[0:1].squeeze(), a_np[0])
try:
    a[0, 0, 0]
    raise AssertionError("three indices of a 2-D tensor were accepted")
except thd.IndexError as e:
    assert "3 indices" in str(e), e

# ---- gather, scatter, masks, split, sort ----
with thd.node(1):
    idx = thd.tensor(np.array([[0, 3], [1, 2], [2, 0]], dtype=np.int64)).dist_send()
same(a.gather(1, idx), np.take_along_axis(a_np, np.array([[0, 3], [1, 2], [2, 0]]), axis=1))
sc = (b * 0.0).scatter(1, idx, 7.0).numpy()
assert sc.sum() == 7.0 * 6
same(a.masked_fill(a < 0, 0.0), np.where(a_np < 0, 0, a_np))
parts = a.split(1, dim=0)
assert len(parts) == 3
same(parts[2], a_np[2:3])
assert [p.shape for p in a.chunk(2, dim=1)] == [(3, 2), (3, 2)]
values, indices = (-a).sort(dim=1)
same(values, np.sort(-a_np, axis=1))
top, where_top = a.topk(2, dim=1)
assert type(a.topk(2)) is thd.return_types.topk and type((-a).sort()) is thd.return_types.sort
same(a.sort(dim=1).values, np.sort(a_np, axis=1))
same(top, np.sort(a_np, axis=1)[:, ::-1][:, :2])

# ---- free functions and factories ----
same(thd.cat([a, b], dim=0), np.concatenate([a_np, np.full((3, 4), 2.0)]))
same(thd.stack([a, b]), np.stack([a_np, np.full((3, 4), 2.0)]))
same(thd.where(a > 0, a, b), np.where(a_np > 0, a_np, 2.0))
same(thd.where(a > 0, 1.0, -1.0), np.where(a_np > 0, 1.0, -1.0))
same(thd.eye(3, node=1), np.eye(3))
same(thd.eye(2, 3), np.eye(2, 3))
same(thd.linspace(0, 1, 5), np.linspace(0, 1, 5))
r = thd.randint(3, 7, (100,), node=1)
assert r.node == 1 and r.dtype == thd.int64
rv = r.numpy()
assert rv.min() >= 3 and rv.max() < 7
try:
    thd.cat([a, thd.ones(3, 4)])  # node 1 and node 0
    raise AssertionError("cat of tensors on two nodes was accepted")
except thd.Error as e:
    assert "node" in str(e), e

thd.shutdown()
print("PASS more_ops.py")
