"""thd.Tensor, the local tensor: NumPy in and out."""

import gc

import numpy as np
import pytest

import thd

NUMPY_DTYPES = {
    np.bool_: thd.bool, np.uint8: thd.uint8, np.int8: thd.int8, np.int32: thd.int32, np.int64: thd.int64,
    np.float16: thd.float16, np.float32: thd.float32, np.float64: thd.float64,
}


@pytest.mark.parametrize("np_dtype", list(NUMPY_DTYPES), ids=lambda d: np.dtype(d).name)
def test_numpy_round_trip_per_dtype(np_dtype):
    a = (np.arange(12) % 5).astype(np_dtype).reshape(3, 4)
    t = thd.from_numpy(a)
    assert t.dtype == NUMPY_DTYPES[np_dtype]
    assert t.shape == (3, 4)
    b = t.numpy()
    assert b.dtype == a.dtype
    np.testing.assert_array_equal(a, b)
    assert t.tolist() == a.tolist()


def test_strided_and_byte_swapped_arrays():
    a = np.arange(24, dtype=np.float64).reshape(4, 6)[::2, 1::2]
    np.testing.assert_array_equal(thd.from_numpy(a).numpy(), a)
    big = np.arange(5, dtype=">i4")
    assert thd.from_numpy(big).tolist() == [0, 1, 2, 3, 4]
    assert thd.from_numpy(a.T).shape == (3, 2)


def test_scalars_and_empty():
    t = thd.from_numpy(np.array(2.5))
    assert t.shape == () and t.item() == 2.5 and t.tolist() == 2.5
    assert isinstance(thd.tensor(3).item(), int)
    assert isinstance(thd.tensor(True).item(), bool)
    e = thd.from_numpy(np.zeros((0, 3), dtype=np.int32))
    assert e.shape == (0, 3) and e.numpy().shape == (0, 3)


def test_tensor_infers_dtypes_as_torch_tensor_does():
    # Python floats give torch's default float32; NumPy data keeps its own dtype.
    assert thd.tensor([1.0, 2.5]).dtype == thd.float32
    assert thd.tensor(2.5).dtype == thd.float32
    assert thd.tensor([1, 2.5]).dtype == thd.float32
    assert thd.tensor([1, 2]).dtype == thd.int64
    assert thd.tensor([True, False]).dtype == thd.bool
    assert thd.tensor(np.array([1.0])).dtype == thd.float64
    assert thd.tensor(np.float64(1.0)).dtype == thd.float64
    assert thd.tensor([1.0], dtype=thd.float64).dtype == thd.float64


def test_views_and_conversions():
    t = thd.tensor([[1, 2, 3], [4, 5, 6]])
    assert t.dtype == thd.int64
    assert t.view(3, 2).tolist() == [[1, 2], [3, 4], [5, 6]]
    assert t.reshape((6,)).tolist() == [1, 2, 3, 4, 5, 6]
    assert t.to(thd.float32).dtype == thd.float32
    assert t.to(thd.float32).tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert t.size() == (2, 3) and t.size(-1) == 3 and len(t) == 2 and t.dim() == 2 and t.numel() == 6
    assert thd.tensor([1, 2], dtype=np.float64).dtype == thd.float64
    assert "tensor(" in repr(t)


def test_item_of_more_than_one_element_raises():
    with pytest.raises(thd.Error):
        thd.tensor([1, 2]).item()


def test_dist_send_needs_a_session():
    with pytest.raises(thd.ValueError, match="not initialized"):
        thd.tensor([1.0]).dist_send()


def test_truth_value():
    assert bool(thd.tensor([3])) and not bool(thd.tensor(0.0))
    with pytest.raises(thd.ValueError, match="ambiguous"):
        bool(thd.tensor([1, 2]))


def test_from_numpy_shares_the_arrays_memory_and_keeps_it_alive():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = thd.from_numpy(a)
    a[1, 2] = 42.0
    assert t.tolist()[1][2] == 42.0
    view = t.numpy()
    assert np.shares_memory(view, a)
    view[0, 0] = -1.0
    assert a[0, 0] == -1.0
    del a, view
    gc.collect()
    assert t.tolist()[0] == [-1.0, 1.0, 2.0]  # the tensor kept the array alive


def test_strided_arrays_are_shared_and_unshareable_ones_copied():
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    t = thd.from_numpy(a[:, ::2])
    assert t.shape == (3, 2) and np.shares_memory(t.numpy(), a)
    ro = np.arange(4, dtype=np.float64)
    ro.flags.writeable = False
    assert not np.shares_memory(thd.from_numpy(ro).numpy(), ro)
    swapped = np.arange(4, dtype=">i4")
    assert thd.from_numpy(swapped).tolist() == [0, 1, 2, 3]


def test_numpy_asarray_and_memoryview_view_the_tensor_without_a_copy():
    t = thd.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=thd.float32)
    a, b = np.asarray(t), t.numpy()
    assert np.shares_memory(a, b)
    m = memoryview(t)
    assert m.format == "f" and m.shape == (2, 2) and m.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert not np.shares_memory(np.array(t, copy=True), b)
    # No bfloat16 in Python or NumPy: its buffer holds the 16-bit patterns.
    assert memoryview(t.to(thd.bfloat16)).format == "H"
    with pytest.raises(thd.TypeError, match="bfloat16"):
        t.to(thd.bfloat16).numpy()
