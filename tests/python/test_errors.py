"""thd's exceptions mirror the C++ hierarchy (include/thd/error.h) and the matching
Python built-ins, and carry the C++ error's context."""

import builtins

import numpy as np
import pytest

import thd
from conftest import check_job

HIERARCHY = {
    # thd class: (thd base, Python built-in it also is)
    "Error": (None, RuntimeError),
    "ValueError": ("Error", builtins.ValueError),
    "ShapeError": ("ValueError", builtins.ValueError),
    "TypeError": ("Error", builtins.TypeError),
    "IndexError": ("Error", builtins.IndexError),
    "TimeoutError": ("Error", builtins.TimeoutError),
    "ConnectionError": ("Error", builtins.ConnectionError),
    "PeerLost": ("ConnectionError", builtins.ConnectionError),
    "WorkerLost": ("PeerLost", builtins.ConnectionError),
    "RemoteError": ("Error", RuntimeError),
    "NotImplementedError": ("Error", builtins.NotImplementedError),
    "CudaError": ("Error", RuntimeError),
    "OutOfMemoryError": ("CudaError", RuntimeError),
    "AuthError": ("Error", RuntimeError),
    "HostOutOfMemoryError": ("Error", builtins.MemoryError),
    "RemoteOutOfMemoryError": ("RemoteError", builtins.MemoryError),
    "RemoteValueError": ("RemoteError", builtins.ValueError),
    "RemoteShapeError": ("RemoteValueError", builtins.ValueError),
    "RemoteTypeError": ("RemoteError", builtins.TypeError),
    "RemoteIndexError": ("RemoteError", builtins.IndexError),
    "RemoteTimeoutError": ("RemoteError", builtins.TimeoutError),
    "RemoteConnectionError": ("RemoteError", builtins.ConnectionError),
    "RemoteNotImplementedError": ("RemoteError", builtins.NotImplementedError),
    "RemoteCudaError": ("RemoteError", RuntimeError),
}


@pytest.mark.parametrize("name", sorted(HIERARCHY))
def test_hierarchy(name):
    cls = getattr(thd, name)
    base, builtin = HIERARCHY[name]
    assert cls is getattr(thd.errors, name)
    assert issubclass(cls, thd.Error)
    assert issubclass(cls, builtin)
    if base:
        assert issubclass(cls, getattr(thd, base))


def test_context_attributes():
    e = thd.WorkerLost("gone", op="get", node=1, rank=0, peer=2)
    assert (e.message, e.op, e.node, e.rank, e.peer) == ("gone", "get", 1, 0, 2)
    assert str(e) == "gone"
    r = thd.RemoteError("boom", op="add", node=0, op_id=7)
    assert r.op_id == 7 and r.node == 0 and r.kind == "generic"
    assert thd.RemoteShapeError("bad", op_id=3).kind == "shape"
    assert thd.RemoteOutOfMemoryError("full").kind == "out_of_memory"


def test_a_remote_error_raises_the_class_of_its_kind():
    check_job("remote_error_kinds.py")


def test_bad_shape_raises_shape_error_with_its_op():
    t = thd.from_numpy(np.zeros(6, dtype=np.float32))
    with pytest.raises(thd.ShapeError) as info:
        t.view(4)
    e = info.value
    assert isinstance(e, ValueError) and isinstance(e, thd.ValueError)
    assert e.op == "view"
    assert e.node is None and e.rank is None and e.peer is None
    assert "[4]" in e.message and "6" in e.message
    assert e.file and e.line > 0
    assert str(e).startswith("view: ")


def test_catchable_as_the_builtin():
    t = thd.from_numpy(np.zeros((2, 3), dtype=np.float32))
    with pytest.raises(ValueError):
        t.reshape(5)
    with pytest.raises(TypeError):
        thd.from_numpy(np.zeros(2, dtype=np.complex64))


def test_unsupported_numpy_dtype_names_it():
    with pytest.raises(thd.TypeError, match="complex64") as info:
        thd.from_numpy(np.zeros(2, dtype=np.complex64))
    assert info.value.op == "from_numpy"


def test_bfloat16_has_no_numpy_array():
    t = thd.tensor([1.5, 2.0], dtype=thd.bfloat16)
    with pytest.raises(thd.TypeError, match="bfloat16"):
        t.numpy()
    assert t.tolist() == [1.5, 2.0]


def test_master_worker_call_without_a_session():
    with pytest.raises(thd.ValueError, match="not initialized") as info:
        thd.zeros(2)
    assert info.value.op == "zeros"
    with pytest.raises(thd.ValueError):
        thd.synchronize()


def test_negative_node_raises_index_error():
    with pytest.raises(thd.IndexError) as info:
        with thd.node(-1):
            pass
    assert isinstance(info.value, IndexError)
    assert info.value.op == "NodeScope"
    assert thd.current_node() == 0


def test_bad_timeout():
    with pytest.raises(thd.TypeError, match="timedelta"):
        thd.init_master_worker(timeout="soon")
    for bad in (0, -1.5, float("nan"), float("inf")):
        with pytest.raises(thd.ValueError, match="positive") as info:
            thd.init_master_worker(timeout=bad)
        assert info.value.op == "init_master_worker"
    assert not thd.is_master()


def test_bad_knobs():
    for bad in (-1.0, float("nan"), 7200.0):
        with pytest.raises(thd.ValueError, match="flush_after") as info:
            thd.init_master_worker(flush_after=bad)
        assert info.value.op == "init_master_worker"
    with pytest.raises(thd.ValueError, match="max_streams_per_node"):
        thd.init_master_worker(max_streams_per_node=5000, world_size=1, rank=0, init_method="tcp://127.0.0.1:1")
    assert not thd.is_master()
