"""thd: a master-worker distributed tensor runtime, from Python.

One program, the master, drives tensors that live on worker processes (nodes
0..N-1) with ordinary tensor code::

    import thd
    thd.init_master_worker()          # under `thdrun -n 3 python3 prog.py`
    x = thd.ones(20, 20)              # on node 0
    with thd.node(1):
        y = thd.randn(20, 20)         # on node 1
    z = x + y.to_node(0)              # returns at once; runs on node 0
    print(z.sum().item())             # waits for the result
    thd.shutdown()

See docs/python.md for what the package offers so far.
"""

import atexit as _atexit
import builtins as _builtins
import datetime as _datetime
import functools as _functools
import signal as _signal
import sys as _sys
import threading as _threading

import numpy as _np

from . import errors
from . import return_types
from .errors import (
    AuthError,
    ConnectionError,
    CudaError,
    Error,
    IndexError,
    NotImplementedError,
    OutOfMemoryError,
    PeerLost,
    RemoteError,
    ShapeError,
    TimeoutError,
    TypeError,
    ValueError,
    WorkerLost,
)
from .errors import (  # the host out of memory; a worker's error by its kind (RemoteError.kind)
    HostOutOfMemoryError,
    RemoteConnectionError,
    RemoteCudaError,
    RemoteIndexError,
    RemoteNotImplementedError,
    RemoteOutOfMemoryError,
    RemoteShapeError,
    RemoteTimeoutError,
    RemoteTypeError,
    RemoteValueError,
)
from . import _C

# Loading the backends' libraries leaves SIGINT at the system's default beneath
# Python (libthd undoes the handler libfabric's PSM driver installs), so Ctrl-C
# would kill the process instead of raising KeyboardInterrupt: give it back.
if _threading.current_thread() is _threading.main_thread():
    _sigint = _signal.getsignal(_signal.SIGINT)
    if _sigint is not None:
        _signal.signal(_signal.SIGINT, _sigint)
    del _sigint
from ._C import (
    DistributedTensor,
    Event,
    Graph,
    ReduceOp,
    Stream,
    Tensor,
    backend_name,
    cat,
    current_device,
    current_node,
    current_stream,
    default_stream,
    device,
    dtype,
    graph,
    is_master,
    manual_seed_all,
    node,
    num_nodes,
    promote_types,
    stack,
    stats,
    stream,
    where,
)
# Process-group mode; its all_reduce, broadcast, reduce, all_gather and
# reduce_scatter also run master-worker mode's collectives on DistributedTensor lists.
from . import _process_group
from ._process_group import *  # noqa: F401,F403 - the names of _process_group.__all__

__version__ = _C.__version__

# ---- dtypes: every one of include/thd/dtype.h, with torch's short names ------------
bool = dtype.bool  # noqa: A001 - torch.bool's name; only shadows the builtin inside thd
uint8 = dtype.uint8
int8 = dtype.int8
int32 = dtype.int32
int64 = dtype.int64
float16 = dtype.float16
bfloat16 = dtype.bfloat16
float32 = dtype.float32
float64 = dtype.float64
half = float16
float = float32  # noqa: A001
double = float64
int = int32  # noqa: A001
long = int64
byte = uint8
char = int8

# The module's own names shadow these builtins (as torch.int, torch.float do).
_builtin_int = _builtins.int
_builtin_float = _builtins.float


def _to_dtype(value, default=None):
    """A thd dtype from a thd dtype, a NumPy dtype or type, or a name ("float32")."""
    if value is None:
        return default
    if isinstance(value, dtype):
        return value
    try:
        name = _np.dtype(value).name
    except _builtins.TypeError:
        name = value if isinstance(value, str) else None
    if name is not None and name in dtype.__members__:
        return dtype.__members__[name]
    raise TypeError(f"dtype: {value!r} is neither a thd dtype (thd.float32, ...) nor a NumPy dtype thd has",
                    op="dtype")


def _shape(size, op):
    """A shape from f(2, 3) or f((2, 3))."""
    if len(size) == 1 and not isinstance(size[0], _builtin_int) and hasattr(size[0], "__iter__"):
        size = tuple(size[0])
    for s in size:
        if not hasattr(s, "__index__"):
            raise TypeError(f"{op}: a size is an int, got {type(s).__name__}", op=op)
    return [s.__index__() for s in size]


# ---- the session ------------------------------------------------------------------


def init_master_worker(backend=None, init_method=None, timeout=300.0, world_size=None, rank=None, token=None, *,
                       bind_host=None, max_ops_in_flight=None, max_bytes_in_flight=None, batch_bytes=None,
                       flush_after=None, max_streams_per_node=None):
    """Joins a master-worker job; rank 0 returns as the master.

    In an SPMD launch (``thdrun -n N python3 prog.py``, mpirun) every other rank
    serves as worker node rank-1 and exits the process when the master shuts down:
    for them this call never returns. Attaching to a worker pool
    (``init_method="tcp://host:port"`` of ``thdrun --pool``), the caller is the master.

    Args:
        backend: the DataChannel backend ("tcp", "mpi", "ucx", "libfabric"); None
            takes $THD_BACKEND (``thdrun --backend`` sets it), else "tcp".
        init_method: "env://" (the default; what thdrun provides), "tcp://host:port"
            (a worker pool, or with rank and world_size), "file:///path".
        timeout: seconds (a number) or a ``datetime.timedelta``: the rendezvous's
            limit, and how long a wait for a worker goes on while it makes no progress.
        world_size: master + workers, when init_method does not say.
        rank: this process's rank, when init_method does not say.
        token: the job's shared secret; None reads $THD_AUTH_TOKEN or the file named
            by $THD_AUTH_TOKEN_FILE (thdrun sets it).

    Keyword-only, None keeping the C++ default (thd::MasterWorkerOptions):
        bind_host: the address this process listens on ("127.0.0.1").
        max_ops_in_flight, max_bytes_in_flight: flow control, the ops and upload
            bytes in flight per node before the master waits (65536, 256 MiB).
        batch_bytes: a node's command buffer is sent past this size (64 KiB).
        flush_after: seconds (or a timedelta) an idle buffer waits before it is
            sent (200e-6).
        max_streams_per_node: live thd.Stream objects per node (256, at most 4096).

    Raises thd.ValueError when already initialized or the job has no worker,
    thd.TimeoutError when the rendezvous runs out of time, thd.AuthError when a peer
    fails the handshake. The GIL is released while it waits.
    """
    if isinstance(timeout, _datetime.timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, _builtins.bool) or not isinstance(timeout, (_builtin_int, _builtin_float)):
        raise TypeError("init_master_worker: timeout is seconds (a number) or a datetime.timedelta, got "
                        f"{type(timeout).__name__}", op="init_master_worker")
    # A worker rank exits inside the call without Python's own shutdown: what it
    # printed so far must be out first.
    for stream in (_sys.stdout, _sys.stderr):
        if stream is not None:
            stream.flush()
    if isinstance(flush_after, _datetime.timedelta):
        flush_after = flush_after.total_seconds()
    _C._init_master_worker(backend, init_method, _builtin_float(timeout), world_size, rank, token, bind_host,
                           max_ops_in_flight, max_bytes_in_flight, batch_bytes, flush_after, max_streams_per_node)


def shutdown():
    """Waits for every node and ends the session: workers free everything, and those
    of an SPMD launch exit. Raises the first remote error not yet reported
    (thd.RemoteError). Safe to call twice; also runs at interpreter exit. Releases
    the GIL while it waits."""
    _C.shutdown()


def synchronize():
    """Waits until every op issued so far has run on every node; raises the first
    remote error not yet raised (thd.RemoteError), or thd.WorkerLost. Releases the GIL
    while it waits, so other Python threads run."""
    _C.synchronize()


def _shutdown_at_exit():
    try:
        _C.shutdown()
    except Error as e:  # nothing is left to raise it to
        print(f"thd: shutdown at exit: {e}", file=_sys.stderr)
    finally:
        _C._remove_interrupt_check()


_atexit.register(_shutdown_at_exit)


# ---- creation ------------------------------------------------------------------------


def _with_device(make):
    """Adds device= to a factory: the tensor is made inside `with thd.device(device):`."""

    @_functools.wraps(make)
    def made_on(*args, device=None, **kwargs):
        if device is None:
            return make(*args, **kwargs)
        with _C._device_of(device):
            return make(*args, **kwargs)

    made_on.__doc__ = (make.__doc__ or "") + (
        "\n\n    device: the device of the node it lives on, a thd.device or 'cpu', 'cuda:<i>' "
        "(default: thd.current_device()).")
    return made_on


@_with_device
def empty(*size, dtype=None, node=None):
    """An uninitialized DistributedTensor of shape `size` on `node` (default: the
    current node, see thd.node); dtype defaults to thd.float32."""
    return _C._empty(_shape(size, "empty"), _to_dtype(dtype, float32), node)


@_with_device
def zeros(*size, dtype=None, node=None):
    """A DistributedTensor of zeros of shape `size` (ints or one sequence) on `node`
    (default: the current node); dtype defaults to thd.float32."""
    return _C._zeros(_shape(size, "zeros"), _to_dtype(dtype, float32), node)


@_with_device
def ones(*size, dtype=None, node=None):
    """A DistributedTensor of ones of shape `size` on `node`; dtype defaults to thd.float32."""
    return _C._ones(_shape(size, "ones"), _to_dtype(dtype, float32), node)


@_with_device
def full(size, fill_value, dtype=None, node=None):
    """A DistributedTensor of shape `size` (a sequence) filled with `fill_value`, on
    `node`; dtype defaults to thd.float32."""
    if hasattr(size, "__index__"):
        size = (size,)
    return _C._full(_shape((tuple(size),), "full"), fill_value, _to_dtype(dtype, float32), node)


@_with_device
def eye(n, m=None, dtype=None, node=None):
    """A DistributedTensor n x m (m = n when None) with ones on the diagonal, on `node`."""
    return _C._eye(n, -1 if m is None else m, _to_dtype(dtype, float32), node)


@_with_device
def linspace(start, end, steps, dtype=None, node=None):
    """A 1-D DistributedTensor of `steps` values evenly spaced from start to end
    (both included), on `node`."""
    return _C._linspace(start, end, steps, _to_dtype(dtype, float32), node)


@_with_device
def randint(low, high, size, dtype=None, node=None):
    """A DistributedTensor of `size` with integers drawn uniformly from [low, high),
    on `node` (int64 unless given), from the node's generator."""
    return _C._randint(low, high, _shape((tuple(size),), "randint"), _to_dtype(dtype, int64), node)


@_with_device
def arange(start, end=None, step=1, dtype=None, node=None):
    """A 1-D DistributedTensor of start, start+step, ... < end (or 0 .. start-1 when
    end is None), on `node`. The dtype is int64 for int arguments, float32 when any
    is a float, unless given."""
    if end is None:
        start, end = 0, start
    return _C._arange(start, end, step, _to_dtype(dtype), node)


@_with_device
def rand(*size, dtype=None, node=None):
    """Uniform values on [0, 1), drawn from `node`'s generator (thd.manual_seed_all)."""
    return _C._rand(_shape(size, "rand"), _to_dtype(dtype, float32), node)


@_with_device
def randn(*size, dtype=None, node=None):
    """Standard normal values, drawn from `node`'s generator (thd.manual_seed_all)."""
    return _C._randn(_shape(size, "randn"), _to_dtype(dtype, float32), node)


def _typed(name, dt):
    @_with_device
    def make(*size, node=None):
        return _C._empty(_shape(size, name), dt, node)

    make.__name__ = make.__qualname__ = name
    make.__doc__ = (f"THD's {name}(*size): an uninitialized {dt!r} DistributedTensor of shape `size` on `node` "
                    "(default: the current node). A factory function, not a class.")
    return make


FloatTensor = _typed("FloatTensor", float32)
DoubleTensor = _typed("DoubleTensor", float64)
LongTensor = _typed("LongTensor", int64)
IntTensor = _typed("IntTensor", int32)


# ---- local tensors ---------------------------------------------------------------------


def from_numpy(array):
    """A local thd.Tensor that shares a NumPy array's memory, as torch.from_numpy:
    writes show in both, and the tensor keeps the array alive. An array the tensor
    cannot share (read-only, another byte order, negative or odd strides) is copied.

    NumPy's bool, uint8, int8, int32, int64, float16, float32 and float64 map to the
    thd dtypes of the same names; others raise thd.TypeError."""
    a = _np.asarray(array)
    shareable = (a.dtype.isnative and a.flags.writeable
                 and all(s >= 0 and s % a.itemsize == 0 for s in a.strides))
    if not shareable:
        a = a.astype(a.dtype.newbyteorder("="), order="C", copy=True)
    return _C._from_numpy(a)


def tensor(data, dtype=None):
    """A local thd.Tensor from a nested list, a number or a NumPy array. Without a
    dtype, torch.tensor's rules: a NumPy array keeps its dtype; Python floats give
    float32 (torch's default dtype), ints int64, bools bool."""
    a = _np.asarray(data)
    dt = _to_dtype(dtype)
    if dt is None and a.dtype == _np.float64 and not isinstance(data, (_np.ndarray, _np.generic)):
        dt = float32
    if dt is not None:
        if dt == bfloat16:
            return from_numpy(a.astype(_np.float32)).to(bfloat16)
        a = a.astype(dt.name)
    return from_numpy(a)


# ---- DLPack: tensors of NumPy, torch and others without a copy --------------------

from ._C import from_dlpack  # noqa: E402 - the C++ half of the section


def _as_local(x, op):
    """A local thd.Tensor of `x`: itself, a NumPy array's memory (from_numpy), any
    other DLPack producer's (torch tensors: from_dlpack), or a new tensor of a list
    or number."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, _np.ndarray):
        return from_numpy(x)
    if hasattr(x, "__dlpack__"):
        try:
            return from_dlpack(x)
        except (BufferError, RuntimeError) as e:
            # A dtype the producer's DLPack lacks (bool in torch 1.13): its NumPy view.
            if isinstance(e, Error) or not hasattr(x, "__array__"):
                raise
            return from_numpy(_np.asarray(x))
    if isinstance(x, (list, tuple, _builtin_int, _builtin_float, _builtins.bool, _np.generic)):
        return tensor(x)
    raise TypeError(f"{op}: expected a thd.Tensor, a NumPy array, a torch tensor (or another object with "
                    f"__dlpack__), a list or a number, got {type(x).__name__}", op=op)


def _distributed_from(x, node=None):
    """Uploads `x` to worker `node` (default: the current node, see thd.node) and
    returns the thd.DistributedTensor there: a thd.Tensor, a NumPy array, a torch
    tensor or any object with __dlpack__ (shared through DLPack, so the only copy on
    the master is the contiguous one a strided tensor needs), a list or a number.
    Master only."""
    if isinstance(x, DistributedTensor):
        raise TypeError(f"x is already a DistributedTensor, on node {x.node}; x.to_node(k) copies it to node k "
                        "worker to worker", op="DistributedTensor.from_")
    return _as_local(x, "DistributedTensor.from_").dist_send(node)


DistributedTensor.from_ = staticmethod(_distributed_from)

DistributedTensor.__module__ = "thd"
Tensor.__module__ = "thd"
dtype.__module__ = "thd"
node.__module__ = "thd"
ReduceOp.__module__ = "thd"
Stream.__module__ = "thd"
Event.__module__ = "thd"
stream.__module__ = "thd"
Graph.__module__ = "thd"
graph.__module__ = "thd"

__all__ = [
    "all_gather", "all_reduce", "arange", "AuthError", "backend_name", "bfloat16", "bool", "broadcast", "byte",
    "cat", "char", "ConnectionError", "CudaError", "current_node", "current_stream", "default_stream",
    "DistributedTensor", "double", "DoubleTensor", "dtype", "empty", "Error", "errors", "Event", "eye", "float",
    "float16", "float32", "float64", "FloatTensor", "from_numpy", "full", "half", "IndexError",
    "init_master_worker", "int", "int32", "int64", "int8", "IntTensor", "is_master", "linspace", "long",
    "LongTensor", "manual_seed_all", "node", "NotImplementedError", "num_nodes", "ones", "OutOfMemoryError",
    "PeerLost", "promote_types", "rand", "randint", "randn", "reduce", "reduce_scatter", "ReduceOp", "RemoteError",
    "ShapeError", "shutdown", "stack", "stats", "Stream", "stream", "synchronize", "Tensor", "tensor",
    "TimeoutError", "TypeError", "uint8", "ValueError", "where", "WorkerLost", "zeros",
]
__all__ += [
    "HostOutOfMemoryError", "RemoteConnectionError", "RemoteCudaError", "RemoteIndexError", "RemoteNotImplementedError",
    "RemoteOutOfMemoryError", "RemoteShapeError", "RemoteTimeoutError", "RemoteTypeError", "RemoteValueError",
]
__all__ += [n for n in _process_group.__all__ if n not in __all__]
__all__ += ["from_dlpack", "device", "current_device"]
__all__ += ["Graph", "graph"]
__all__ += ["return_types"]
