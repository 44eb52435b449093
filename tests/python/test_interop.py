"""Local thd.Tensor interop without copies: DLPack both ways with NumPy and torch
(__dlpack__, __dlpack_device__, thd.from_dlpack), the capsule's one-time ownership
and the producer's lifetime, and the local tensor's arithmetic operators. The
upload of torch tensors to workers (DistributedTensor.from_) runs as
programs/interop.py in test_from_uploads_every_kind_of_tensor."""

import ctypes
import gc
import weakref

import numpy as np
import pytest

import thd
from conftest import check_job

ALL = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
VALUES = [[1, 0, 1], [0, 1, 1]]


def np_ptr(a):
    return a.__array_interface__["data"][0]


def np_has_dlpack(dtype):
    """Whether this NumPy's own DLPack carries `dtype` (NumPy 1.24's has no bool)."""
    try:
        np.from_dlpack(np.zeros(2, dtype=dtype))
        return True
    except (BufferError, RuntimeError, TypeError):
        return False


def torch_has_dlpack(torch, dtype):
    """Whether this torch's own DLPack carries `dtype` (torch 1.13's has no bool)."""
    try:
        torch.from_dlpack(torch.zeros(2, dtype=dtype))
        return True
    except (BufferError, RuntimeError, TypeError):
        return False


def capsule_name(capsule):
    return repr(capsule).split('"')[1]


# ---- thd and NumPy ---------------------------------------------------------------------


@pytest.mark.parametrize("name", [d for d in ALL if d != "bfloat16"])
def test_numpy_to_thd_to_numpy_shares_memory(name):
    if not np_has_dlpack(name):
        pytest.skip(f"this NumPy's DLPack has no {name}")
    a = np.array(VALUES).astype(name)
    t = thd.from_dlpack(a)
    b = np.from_dlpack(t)
    assert t.dtype == getattr(thd, name) and t.shape == (2, 3)
    assert t.data_ptr() == np_ptr(a) == np_ptr(b)
    a[0, 1] = 1  # written through NumPy, seen by thd and the other array
    assert t.tolist()[0][1] == 1 and b[0, 1] == 1
    t.fill_(0)  # written through thd
    assert not a.any() and not b.any()


@pytest.mark.parametrize("name", [d for d in ALL if d != "bfloat16"])
def test_thd_to_numpy_per_dtype(name):
    if not np_has_dlpack(name):
        pytest.skip(f"this NumPy's DLPack has no {name}")
    t = thd.tensor(VALUES, dtype=name)
    a = np.from_dlpack(t)
    assert a.dtype == np.dtype(name) and a.tolist() == t.tolist()
    assert np_ptr(a) == t.data_ptr()


@pytest.mark.parametrize("name", ALL)
def test_thd_to_thd_through_both_capsule_forms_per_dtype(name):
    t = thd.tensor(VALUES, dtype=name)
    classic = t.__dlpack__()
    versioned = t.__dlpack__(max_version=(1, 0))
    assert capsule_name(classic) == "dltensor" and capsule_name(versioned) == "dltensor_versioned"
    for capsule in (classic, versioned):
        u = thd.from_dlpack(capsule)
        assert u.dtype == t.dtype and u.shape == t.shape and u.tolist() == t.tolist()
        assert u.data_ptr() == t.data_ptr()
    # A producer that speaks DLPack 1.0 is asked for it.
    assert thd.from_dlpack(t).data_ptr() == t.data_ptr()


def test_dlpack_device_and_the_export_options():
    t = thd.tensor([1.0, 2.0])
    assert t.__dlpack_device__() == (1, 0)
    assert thd.from_dlpack(t.__dlpack__(dl_device=(1, 0))).data_ptr() == t.data_ptr()
    copied = thd.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True))
    assert copied.data_ptr() != t.data_ptr() and copied.tolist() == [1.0, 2.0]
    assert capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    with pytest.raises(thd.ValueError, match="stream=None"):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError, match="host memory"):
        t.__dlpack__(dl_device=(2, 0))
    with pytest.raises(thd.TypeError, match="max_version"):
        t.__dlpack__(max_version="1.0")


def test_strided_tensors_both_ways():
    a = np.arange(24, dtype=np.float64).reshape(4, 6)[::2, 1::2]
    t = thd.from_dlpack(a)
    assert t.shape == (2, 3) and t.stride() == (12, 2) and not t.is_contiguous()
    assert t.data_ptr() == np_ptr(a) and t.tolist() == a.tolist()
    t.fill_(-1.0)
    assert (a == -1).all()

    u = thd.tensor([[1, 2, 3], [4, 5, 6]], dtype="int32").t()
    b = np.from_dlpack(u)
    assert b.strides == (4, 12) and b.tolist() == [[1, 4], [2, 5], [3, 6]] and np_ptr(b) == u.data_ptr()


def test_zero_dim_and_empty_tensors():
    s = thd.from_dlpack(np.array(2.5))
    assert s.shape == () and s.item() == 2.5
    e = thd.from_dlpack(np.zeros((0, 3), dtype=np.int32))
    assert e.shape == (0, 3) and e.dtype == thd.int32
    assert np.from_dlpack(thd.tensor(7)).item() == 7
    assert np.from_dlpack(thd.from_numpy(np.zeros((2, 0)))).shape == (2, 0)


def test_a_capsule_gives_up_its_tensor_once():
    t = thd.tensor([1, 2, 3])
    capsule = t.__dlpack__()
    thd.from_dlpack(capsule)
    assert capsule_name(capsule) == "used_dltensor"
    with pytest.raises(thd.ValueError, match="consumed already"):
        thd.from_dlpack(capsule)
    versioned = t.__dlpack__(max_version=(1, 0))
    thd.from_dlpack(versioned)
    assert capsule_name(versioned) == "used_dltensor_versioned"
    with pytest.raises(thd.ValueError, match="consumed already"):
        thd.from_dlpack(versioned)


def test_the_producer_lives_while_thd_uses_its_memory():
    a = np.arange(1000, dtype=np.float32)
    alive = weakref.ref(a)
    t = thd.from_dlpack(a)
    del a
    gc.collect()
    assert alive() is not None
    np.testing.assert_array_equal(t.numpy(), np.arange(1000, dtype=np.float32))
    view = t.view(10, 100)  # a view holds the memory as well
    del t
    gc.collect()
    assert alive() is not None and view.tolist()[9][99] == 999.0
    del view
    gc.collect()
    assert alive() is None


def test_an_unconsumed_capsule_releases_its_tensor():
    a = np.arange(10.0)
    alive = weakref.ref(a)
    t = thd.from_numpy(a)
    capsule = t.__dlpack__()
    del a, t
    gc.collect()
    assert alive() is not None  # the capsule holds the tensor, which holds the array
    del capsule
    gc.collect()
    assert alive() is None


def test_an_exported_tensor_outlives_its_thd_handle():
    t = thd.tensor([[1.5, 2.5], [3.5, 4.5]])
    a = np.from_dlpack(t)
    del t
    gc.collect()
    _ = [np.ones(1000) for _ in range(100)]  # reuse what a freed block would have been
    assert a.tolist() == [[1.5, 2.5], [3.5, 4.5]]


def test_what_thd_cannot_take_raises_a_clear_error():
    with pytest.raises(thd.TypeError, match="16 bits"):
        thd.from_dlpack(np.zeros(2, dtype=np.int16))
    with pytest.raises(thd.ValueError, match="negative strides"):
        thd.from_dlpack(np.arange(4.0)[::-1])
    with pytest.raises(thd.TypeError, match="__dlpack__"):
        thd.from_dlpack([1, 2])
    with pytest.raises(thd.TypeError, match="holds no DLPack tensor"):
        make = ctypes.pythonapi.PyCapsule_New
        make.restype = ctypes.py_object
        make.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        thd.from_dlpack(make(ctypes.addressof(ctypes.c_int(0)), b"something_else", None))


def test_a_device_tensor_is_refused_before_it_is_exported():
    class OnCuda:
        asked = False

        def __dlpack_device__(self):
            return (2, 1)

        def __dlpack__(self, stream=None):
            OnCuda.asked = True
            raise AssertionError("not to be called")

    with pytest.raises(thd.ValueError, match="CUDA:1"):
        thd.from_dlpack(OnCuda())
    assert not OnCuda.asked


# ---- a producer written here: DLPack 1.0's flags and versions, the deleter's one call ----


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Versioned(ctypes.Structure):
    pass


_Deleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(_Versioned))
_Versioned._fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                       ("deleter", _Deleter), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


class VersionedProducer:
    """Four int32 values in a DLPack 1.0 capsule, with the flags and version given;
    counts the deleter's calls."""

    def __init__(self, flags=0, major=1, byte_offset=0):
        self.data = (ctypes.c_int32 * 4)(1, 2, 3, 4)
        self.shape = (ctypes.c_int64 * 1)(4)
        self.deleted = 0
        self.deleter = _Deleter(self._delete)  # kept: ctypes frees a callback with its last reference
        self.managed = _Versioned(major, 0, None, self.deleter, flags,
                                  _DLTensor(ctypes.cast(self.data, ctypes.c_void_p), _Device(1, 0), 1,
                                            _DataType(0, 32, 1), self.shape, None, byte_offset))

    def _delete(self, _):
        self.deleted += 1

    def capsule(self):
        make = ctypes.pythonapi.PyCapsule_New
        make.restype = ctypes.py_object
        make.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return make(ctypes.addressof(self.managed), b"dltensor_versioned", None)


def test_a_consumed_capsule_is_released_once_when_thd_lets_go():
    p = VersionedProducer()
    t = thd.from_dlpack(p.capsule())
    assert t.tolist() == [1, 2, 3, 4] and t.data_ptr() == ctypes.addressof(p.data)
    t += 10
    assert list(p.data) == [11, 12, 13, 14]
    v = t.view(2, 2)
    del t
    gc.collect()
    assert p.deleted == 0
    del v
    gc.collect()
    assert p.deleted == 1


def test_read_only_memory_is_copied_and_refused_capsules_stay_the_producers():
    p = VersionedProducer(flags=1)  # DLPACK_FLAG_BITMASK_READ_ONLY
    t = thd.from_dlpack(p.capsule())
    assert t.data_ptr() != ctypes.addressof(p.data) and t.tolist() == [1, 2, 3, 4]
    assert p.deleted == 1  # the copy holds nothing of the producer's
    t.fill_(0)
    assert list(p.data) == [1, 2, 3, 4]

    newer = VersionedProducer(major=2)
    capsule = newer.capsule()
    with pytest.raises(BufferError, match="DLPack 2.0"):
        thd.from_dlpack(capsule)
    assert capsule_name(capsule) == "dltensor_versioned" and newer.deleted == 0  # still the producer's

    odd = VersionedProducer(byte_offset=2)
    capsule = odd.capsule()
    with pytest.raises(thd.ValueError, match="not aligned"):
        thd.from_dlpack(capsule)
    assert capsule_name(capsule) == "dltensor_versioned" and odd.deleted == 0


# ---- thd and torch ---------------------------------------------------------------------


def torch_dtype(torch, name):
    return getattr(torch, name)


@pytest.mark.parametrize("name", ALL)
def test_torch_to_thd_to_torch_shares_memory(name):
    torch = pytest.importorskip("torch")
    dt = torch_dtype(torch, name)
    if not torch_has_dlpack(torch, dt):
        pytest.skip(f"this torch's DLPack has no {name}")
    x = torch.tensor(VALUES).to(dt)
    t = thd.from_dlpack(x)
    y = torch.from_dlpack(t)
    assert t.dtype == getattr(thd, name) and t.shape == (2, 3)
    assert t.data_ptr() == x.data_ptr() == y.data_ptr() and y.dtype == dt
    x[0, 1] = 1  # written through torch
    assert t.to(thd.float32).tolist()[0][1] == 1.0 and bool(y[0, 1])
    t.fill_(0)  # written through thd
    assert not x.any() and not y.any()


@pytest.mark.parametrize("name", ALL)
def test_thd_to_torch_per_dtype(name):
    torch = pytest.importorskip("torch")
    dt = torch_dtype(torch, name)
    if not torch_has_dlpack(torch, dt):
        pytest.skip(f"this torch's DLPack has no {name}")
    t = thd.tensor(VALUES, dtype=name)
    x = torch.from_dlpack(t)
    assert x.dtype == dt and x.data_ptr() == t.data_ptr()
    assert x.float().tolist() == t.to(thd.float32).tolist()


def test_torch_strides_lifetime_and_capsules():
    torch = pytest.importorskip("torch")
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    t = thd.from_dlpack(x.t())
    assert t.shape == (4, 3) and t.stride() == (1, 4) and t.tolist() == x.t().tolist()
    y = torch.from_dlpack(thd.tensor([[1, 2, 3], [4, 5, 6]]).t())
    assert y.stride() == (1, 3) and y.tolist() == [[1, 4], [2, 5], [3, 6]]

    # thd keeps torch's memory, and torch thd's, after the other side's handle is gone.
    del x
    gc.collect()
    _ = [torch.ones(1000) for _ in range(100)]
    assert t.tolist() == [[0.0, 4.0, 8.0], [1.0, 5.0, 9.0], [2.0, 6.0, 10.0], [3.0, 7.0, 11.0]]
    del y
    gc.collect()

    # A capsule consumed by torch is gone for thd, and the other way round.
    capsule = thd.tensor([1.0]).__dlpack__()
    torch.utils.dlpack.from_dlpack(capsule)
    with pytest.raises(thd.ValueError, match="consumed already"):
        thd.from_dlpack(capsule)
    capsule = torch.utils.dlpack.to_dlpack(torch.ones(2))
    assert thd.from_dlpack(capsule).tolist() == [1.0, 1.0]
    with pytest.raises(Exception):
        torch.utils.dlpack.from_dlpack(capsule)

    with pytest.raises(thd.TypeError, match="complex"):
        thd.from_dlpack(torch.zeros(2, dtype=torch.complex64))


# ---- the local tensor's operators ----------------------------------------------------


def test_arithmetic_matches_numpy_with_torch_promotion():
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    b = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    ta, tb = thd.from_numpy(a), thd.from_numpy(b)
    for got, want in [(ta + tb, a + b), (ta - tb, a - b), (ta * tb, a * b), (ta / tb, a / b), (ta ** 2, a ** 2),
                      (ta + 1, a + 1), (1 + ta, 1 + a), (10 - ta, 10 - a), (ta * 2, a * 2), (3 * ta, 3 * a),
                      (ta / 4, a / 4), (2 / ta, 2 / a), (-ta, -a), (ta @ tb, a @ b), (ta @ ta.t(), a @ a.T),
                      (ta.add(tb), a + b), (ta.sub(1), a - 1), (ta.mul(tb), a * b), (ta.div(2), a / 2)]:
        assert got.dtype == thd.float32
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    i = thd.tensor([1, 2, 3])
    assert (i * 2).dtype == thd.int64 and (i * 2.5).dtype == thd.float32 and (i / 2).dtype == thd.float32
    assert (i + thd.tensor([0.5, 0.5, 0.5], dtype="float64")).dtype == thd.float64
    assert i.sum().item() == 6


def test_in_place_ops_return_self_and_write_through():
    a = np.array([1.0, 2.0, 3.0])
    t = thd.from_numpy(a)
    same = t
    t += 1
    t *= thd.tensor([2.0, 2.0, 2.0], dtype="float64")
    t -= 1
    t /= 2
    assert t is same
    np.testing.assert_allclose(a, [1.5, 2.5, 3.5])
    assert t.add_(1) is t and t.sub_(thd.tensor(0.5, dtype="float64")) is t
    assert t.mul_(2) is t and t.div_(2) is t
    np.testing.assert_allclose(a, [2.0, 3.0, 4.0])
    assert t.copy_(thd.tensor([7, 8, 9])) is t and a.tolist() == [7.0, 8.0, 9.0]
    i = thd.tensor([1, 2])
    with pytest.raises(thd.TypeError, match="int64"):
        i /= 2  # float32 does not cast back to int64 (as torch)
    assert i.tolist() == [1, 2]


def test_comparisons_give_bool_tensors():
    t = thd.tensor([1, 2, 3])
    u = thd.tensor([3, 2, 1])
    assert (t == u).tolist() == [False, True, False] and (t == u).dtype == thd.bool
    assert (t != 2).tolist() == [True, False, True]
    assert (t < u).tolist() == [True, False, False] and (t <= 2).tolist() == [True, True, False]
    assert (t > u).tolist() == [False, False, True] and (t >= 2).tolist() == [False, True, True]
    assert len({t, u}) == 2  # hashable by identity, as torch's


def test_numpy_and_torch_operands_give_thd_tensors_on_either_side():
    """As torch's: `t OP array`, `array OP t` and `t OP= array` compute in thd with torch's
    promotion, rather than NumPy taking over (or `t +=` rebinding t to an ndarray)."""
    torch = pytest.importorskip("torch")
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    b64 = np.array([0.5, -1.0, 2.0])
    ta, tt = thd.from_numpy(a.copy()), torch.from_numpy(a.copy())
    for other in (b64, torch.from_numpy(b64.copy()), np.array([1, 2, 3], dtype=np.int32)):
        other_t = other if isinstance(other, torch.Tensor) else torch.from_numpy(other)
        for got, want in [(ta + other, tt + other_t), (other + ta, other_t + tt), (ta - other, tt - other_t),
                          (other - ta, other_t - tt), (ta * other, tt * other_t), (other * ta, other_t * tt),
                          (ta / other, tt / other_t), (other / ta, other_t / tt), (ta ** other, tt ** other_t),
                          (ta == other, tt == other_t), (ta < other, tt < other_t), (other < ta, other_t < tt),
                          (other >= ta, other_t >= tt)]:
            assert isinstance(got, thd.Tensor), type(got)
            assert got.dtype.name == str(want.dtype).removeprefix("torch."), (got.dtype, want.dtype)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    m = np.arange(6, dtype=np.float32).reshape(3, 2)
    for got, want in [(ta @ m, a @ m), (m.T @ ta.t(), m.T @ a.T)]:
        assert isinstance(got, thd.Tensor)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
    # In place: the same tensor, its memory written, its dtype kept.
    backing = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    t = thd.from_numpy(backing)
    same = t
    t += np.array([1.0, 1.0, 1.0])
    t *= torch.tensor([2.0, 2.0, 2.0])
    t -= np.float64(1.0)
    assert t is same and t.dtype == thd.float32
    np.testing.assert_allclose(backing, [3.0, 5.0, 7.0])
    # NumPy functions still take the tensor through __array__.
    np.testing.assert_allclose(np.exp(thd.from_numpy(a)), np.exp(a), rtol=1e-6)
    # Lists stay refused, as torch's operators refuse them.
    with pytest.raises(TypeError, match="unsupported operand"):
        _ = ta + [1.0, 2.0, 3.0]
    assert (ta == None) is False  # noqa: E711


def test_bad_operands_raise():
    with pytest.raises(thd.ShapeError):
        _ = thd.tensor([1, 2, 3]) + thd.tensor([1, 2])
    with pytest.raises(TypeError):
        _ = thd.tensor([1, 2]) + "x"
    with pytest.raises(thd.ShapeError):
        _ = thd.tensor([[1.0, 2.0]]) @ thd.tensor([[1.0, 2.0]])


# ---- uploads to a worker ----------------------------------------------------------------


def test_from_uploads_every_kind_of_tensor():
    out = check_job("interop.py")
    try:
        import torch  # noqa: F401 - the program checks torch tensors when it is there
    except ImportError:
        return
    assert "torch tensors uploaded" in out
