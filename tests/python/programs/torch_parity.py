"""DistributedTensor as torch.Tensor (thdrun -n 3): NumPy and torch operands are
refused with the fix instead of NumPy iterating the tensor, NumPy and DLPack
conversions, and the torch methods add/sub/mul/div(alpha=, rounding_mode=), eq..ge,
add_/sub_(alpha=), the dtype shorthands, .T/.mT, float()/int()/index() and
number ** tensor, each compared with torch's result."""

import datetime
import operator

import numpy as np
import torch

import thd

thd.init_master_worker(timeout=datetime.timedelta(seconds=60))


def raises(exc, fragments, f):
    try:
        f()
    except exc as e:
        for fragment in fragments:
            assert fragment in str(e), (fragment, str(e))
        return e
    raise AssertionError(f"{f} did not raise {exc.__name__}")


def same(t, expected):
    """t (a DistributedTensor) has torch tensor `expected`'s dtype and values."""
    got = t.numpy()
    assert t.dtype.name == str(expected.dtype).removeprefix("torch."), (t.dtype, expected.dtype)
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-6, atol=1e-6)


m_t = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 2 - 1
i_t = torch.arange(1, 7, dtype=torch.int64).reshape(2, 3)
with thd.node(1):
    m = thd.DistributedTensor.from_(m_t.numpy())
    i = thd.DistributedTensor.from_(i_t.numpy())

# ---- a local array operand: thd.TypeError naming the upload, never an object array ----
local_operands = [np.ones(3, dtype=np.float32), torch.ones(3), thd.ones(3).get(), [1.0, 2.0, 3.0]]
names = ["numpy.ndarray", "torch.Tensor", "thd.Tensor", "list"]
for a, name in zip(local_operands, names):
    for expr, f in [("DistributedTensor + " + name, lambda: m + a), ("DistributedTensor - " + name, lambda: m - a),
                    ("DistributedTensor * " + name, lambda: m * a), ("DistributedTensor / " + name, lambda: m / a),
                    ("DistributedTensor ** " + name, lambda: m ** a), ("DistributedTensor @ " + name, lambda: m @ a),
                    ("DistributedTensor < " + name, lambda: m < a)]:
        raises(thd.TypeError, [expr, "local array", "worker node 1", "DistributedTensor.from_(other, node=1)"], f)
    # In place falls back to the operator, which refuses; the tensor is unchanged.
    def iadd():
        global m
        m += a
    raises(thd.TypeError, ["DistributedTensor + " + name, "local array"], iadd)
    raises(thd.TypeError, ["DistributedTensor.add_", name.split(".")[-1], "local array"], lambda: m.add_(a))
    raises(thd.TypeError, ["DistributedTensor.mul", "local array"], lambda: m.mul(a))
# The reflected forms: NumPy and torch on the left defer to the tensor, which refuses.
for a, name in zip(local_operands[:2], names[:2]):
    for expr, f in [(name + " + DistributedTensor", lambda: a + m), (name + " - DistributedTensor", lambda: a - m),
                    (name + " * DistributedTensor", lambda: a * m), (name + " / DistributedTensor", lambda: a / m),
                    (name + " ** DistributedTensor", lambda: a ** m)]:
        raises(thd.TypeError, [expr, "local array", "DistributedTensor.from_(other, node=1)"], f)
local = thd.ones(2, 3).get()
raises(thd.TypeError, ["thd.Tensor + DistributedTensor", "local array"], lambda: local + m)
raises(thd.TypeError, ["thd.Tensor @ DistributedTensor", "local array"], lambda: local.t() @ m)
raises(thd.TypeError, ["numpy.ndarray @ DistributedTensor", "local array"], lambda: np.ones((2, 2)) @ m)
raises(thd.TypeError, ["local array"], lambda: np.ones(3) == m)
raises(TypeError, ["does not support ufuncs"], lambda: np.add(m, 1))
same(m, m_t)
# Operands that are neither keep Python's behaviour: == is identity, + is unsupported.
assert (m == None) is False and (m != "a") is True  # noqa: E711
raises(TypeError, ["unsupported operand"], lambda: m + object())
# Numbers, NumPy scalars, 0-d arrays and torch's 0-d tensors are numbers, on either side.
same(np.float32(2) * m + np.array(3), 2 * m_t + 3)
same(1 - m, 1 - m_t)
same(m * np.array(0.5) - np.float64(0.25), m_t * 0.5 - 0.25)
same(i + np.array(1.5), i_t + 1.5)
same(i * np.bool_(True), i_t * True)
same(m + torch.tensor(2.5), m_t + torch.tensor(2.5))
raises(thd.TypeError, ["numpy.ndarray", "local array"], lambda: m + np.array([1.5]))

# ---- NumPy and DLPack ----
for arr in (np.asarray(m), np.array(m), np.asarray(i)):
    assert arr.dtype != object
np.testing.assert_array_equal(np.asarray(m), m_t.numpy())
assert np.asarray(i).dtype == np.int64
assert np.asarray(m, dtype=np.float64).dtype == np.float64
np.testing.assert_array_equal(np.asarray(m, dtype=np.float64), m_t.numpy().astype(np.float64))
for f in (lambda: torch.from_dlpack(m), lambda: np.from_dlpack(m), lambda: m.__dlpack__()):
    raises(thd.TypeError, ["worker node 1", "DLPack", "x.get()"], f)
assert torch.equal(torch.from_dlpack(m.get()), m_t)
raises(thd.TypeError, ["already a DistributedTensor", "to_node"], lambda: thd.DistributedTensor.from_(m, node=0))
# cpu() is a device move on the node, not a download.
assert isinstance(m.cpu(), thd.DistributedTensor) and m.cpu().node == 1

# ---- torch's methods ----
same(m.add(i), m_t.add(i_t))
same(m.add(i, alpha=2), m_t.add(i_t, alpha=2))
same(m.add(3, alpha=2), m_t.add(3, alpha=2))
same(i.add(3, alpha=2), i_t.add(3, alpha=2))
same(m.add(0.5, alpha=-1.5), m_t.add(0.5, alpha=-1.5))
same(m.sub(i), m_t.sub(i_t))
same(m.sub(i, alpha=3), m_t.sub(i_t, alpha=3))
same(i.sub(2, alpha=2), i_t.sub(2, alpha=2))
# In place with alpha, as an optimizer's p.add_(grad, alpha=-lr); self comes back.
p, p_t = m.clone(), m_t.clone()
assert p.add_(i, alpha=-0.5) is p and p.sub_(1.5, alpha=2) is p and p.add_(0.25) is p and p.sub_(i) is p
p_t.add_(i_t, alpha=-0.5).sub_(1.5, alpha=2).add_(0.25).sub_(i_t)
same(p, p_t)
raises(thd.TypeError, ["DistributedTensor.add_", "local array"], lambda: p.add_(np.ones(3), alpha=2))
# The positional number call keeps its own fast path (python/src/fast_inplace.cpp).
assert type(thd.DistributedTensor.__dict__["add_"]).__name__ == "method_descriptor"
same(m.mul(i), m_t.mul(i_t))
same(i.mul(2.5), i_t.mul(2.5))
same(m.div(i), m_t.div(i_t))
same(i.div(4), i_t.div(4))
same(i.div(i, rounding_mode=None), i_t.div(i_t, rounding_mode=None))
raises(thd.ValueError, ["rounding_mode='floor'", "not supported"], lambda: i.div(2, rounding_mode="floor"))
raises(thd.TypeError, ["DistributedTensor.sub", "str"], lambda: m.sub("a"))
for op in ("eq", "ne", "lt", "le", "gt", "ge"):
    same(getattr(m, op)(0.0), getattr(m_t, op)(0.0))
    same(getattr(i, op)(m), getattr(i_t, op)(m_t))
    assert getattr(thd.DistributedTensor, op).__doc__

# The dtype shorthands (torch's short() has no thd dtype), on values a cast to uint8 keeps.
for name in ("bool", "byte", "char", "int", "long", "half", "bfloat16", "float", "double"):
    got = getattr((m + 1) * 3, name)()
    expected = getattr((m_t + 1) * 3, name)()
    assert got.dtype.name == str(expected.dtype).removeprefix("torch."), (name, got.dtype)
    if name != "bfloat16":  # NumPy has no bfloat16
        np.testing.assert_array_equal(got.numpy(), expected.numpy())
    else:
        same(got.float(), expected.float())

# .T and .mT
same(m.T, m_t.T)
same(m[0].T, m_t[0].T)
c_t = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
c = thd.DistributedTensor.from_(c_t.numpy(), node=1)
same(c.mT, c_t.mT)
same(c.T, c_t.permute(2, 1, 0))
raises(thd.ShapeError, ["mT", "1 dims"], lambda: m[0].mT)

# A one-element tensor as a Python number (a sync point), as torch's.
assert float(m[0, 1]) == float(m_t[0, 1]) and isinstance(float(m[0, 1]), float)
assert int(m[1, 2]) == int(m_t[1, 2]) and int(-1.5 + 0 * m[0, 0]) == int(-1.5 + 0 * m_t[0, 0])
assert operator.index(i[1, 0]) == operator.index(i_t[1, 0]) == 4
assert [10, 20, 30, 40, 50][i[0, 2]] == 40 and list(range(i[0, 1])) == [0, 1]
raises(thd.TypeError, ["integral", "float32"], lambda: operator.index(m[0, 0]))
raises(ValueError, ["NaN"], lambda: int(thd.full((1,), float("nan"))))
raises(thd.ValueError, ["one-element", "6 elements"], lambda: float(m))
# An op given a one-element tensor still means the tensor, not its value.
raises(TypeError, [], lambda: thd.full((2,), m[0, 0]))

# number ** tensor
same(2 ** m, 2 ** m_t)
same(2 ** i, 2 ** i_t)
same(2.5 ** i, 2.5 ** i_t)
same(0.5 ** m, 0.5 ** m_t)
same(m ** 2, m_t ** 2)
same(m ** m, m_t ** m_t)
assert (2 ** m).node == 1

thd.shutdown()
print("PASS torch_parity.py")
