"""The operand of DistributedTensor's arithmetic (thdrun -n 2): a tensor, a Python
number or a NumPy scalar, with torch's type promotion; in-place ops return the
object they were called on; anything else is a TypeError naming the op."""

import datetime

import numpy as np

import thd

thd.init_master_worker(timeout=datetime.timedelta(seconds=60))


def values(t):
    return t.numpy().tolist()


x = thd.zeros(4)
y = thd.full((4,), 2.0)
i = thd.full((4,), 3, dtype=thd.int64)

# In place: the same Python object back, as torch (x.add_(1) is x).
for r in (x.add_(1.0), x.sub_(0.5), x.mul_(4), x.div_(2), x.add_(y), x.mul_(y), x.add_(np.float32(1.0))):
    assert r is x, "an in-place op returned a new object"
assert values(x) == [7.0] * 4, values(x)  # ((0 + 1 - .5) * 4 / 2 + 2) * 2 + 1
alias = x
x += 1
x -= y
x *= 2
x /= y
assert x is alias, "x op= ... rebound x to a new object"
assert values(x) == [6.0] * 4, values(x)

# Binary operators, either operand kind, and the reflected forms.
assert values(x + y) == [8.0] * 4 and values(x + 1) == [7.0] * 4 and values(1 + x) == [7.0] * 4
assert values(x - y) == [4.0] * 4 and values(10 - x) == [4.0] * 4
assert values(x * y) == [12.0] * 4 and values(x * True) == [6.0] * 4
assert values(x / y) == [3.0] * 4 and values(x / np.float64(4)) == [1.5] * 4
# torch's promotion: an int tensor with an int stays int, with a float becomes float32.
assert (i + 2).dtype == thd.int64 and values(i * np.int32(2)) == [6] * 4
assert (i + 0.5).dtype == thd.float32 and values(i + 0.5) == [3.5] * 4
i.add_(1)
assert values(i) == [4] * 4

# Comparisons: bool tensors, against a tensor or a number.
assert values(x == y * 3) == [True] * 4 and values(x != 6) == [False] * 4
assert values(x < np.float32(7)) == [True] * 4 and values(x <= y) == [False] * 4
assert values(x > 5) == [True] * 4 and values(y >= x) == [False] * 4
# Against anything else, == and != fall back to Python's identity comparison.
assert (x == "a") is False and (x != None) is True  # noqa: E711

# Neither a tensor nor a number: a local array (a list here) is refused by name,
# anything else is left to Python's "unsupported operand".
for bad in ("a", None, [1.0], object()):
    try:
        x.add_(bad)
    except thd.TypeError as e:
        assert "add_" in str(e) and type(bad).__name__ in str(e), str(e)
    else:
        raise AssertionError(f"x.add_({bad!r}) did not raise")
    try:
        x + bad
    except TypeError as e:
        expected = "local array" if isinstance(bad, list) else "unsupported operand"
        assert expected in str(e), str(e)
    else:
        raise AssertionError(f"x + {bad!r} did not raise")
try:
    x.mul_("2")
except thd.TypeError as e:
    assert "mul_" in str(e), str(e)
else:
    raise AssertionError("x.mul_('2') did not raise")
assert values(x) == [6.0] * 4, "a refused operand changed the tensor"

# add_, sub_, mul_ and div_ of a plain int or float take a path of their own
# (python/src/fast_inplace.cpp); every other call goes to the general binding.
z = thd.zeros(2)
assert z.add_(other=2) is z and z.sub_(1) is z and z.mul_(True) is z and z.div_(np.int64(2)) is z
assert values(z) == [0.5] * 2, values(z)
assert z.add_(2**40).mul_(0) is z and values(z) == [0.0] * 2
try:
    z.add_(2**70)  # no int64: refused as the general binding refuses it
except thd.TypeError as e:
    assert "add_" in str(e), str(e)
else:
    raise AssertionError("add_(2**70) did not raise")
# alpha is keyword-only, as torch's (add_(other, *, alpha=1)).
for call in (lambda: z.add_(), lambda: z.add_(1, 2), lambda: z.add_(1.0, beta=2)):
    try:
        call()
    except TypeError as e:
        assert "add_" in str(e), str(e)
    else:
        raise AssertionError("a wrong call of add_ did not raise")
try:
    i.mul_(0.5)  # int64 * float is float32, which int64 cannot hold: at the call site
except thd.TypeError as e:
    assert "mul_" in str(e) and e.node == 0, (str(e), e.node)
else:
    raise AssertionError("int64 mul_(0.5) did not raise")
try:
    thd.DistributedTensor.add_(None, 1.0)
except TypeError as e:
    assert "DistributedTensor" in str(e), str(e)
else:
    raise AssertionError("add_ of None did not raise")
assert "In-place" in thd.DistributedTensor.add_.__doc__ or "place" in thd.DistributedTensor.add_.__doc__
assert values(i) == [4] * 4, "a refused op changed the tensor"

thd.shutdown()
print("PASS operands.py")
