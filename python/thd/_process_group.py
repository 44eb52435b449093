"""Process-group (SPMD) mode with torch.distributed's names and signatures.

Every process of the job runs the same program (``thdrun -n 4 python3 prog.py``)
and exchanges local thd.Tensor objects with the others, in place::

    import numpy as np
    import thd
    thd.init_process_group()                  # env:// from thdrun; $THD_BACKEND or tcp
    a = np.full(4, float(thd.get_rank()), dtype=np.float32)
    t = thd.from_numpy(a)                     # shares a's memory
    thd.all_reduce(t)                         # a is now the sum over every rank
    thd.destroy_process_group()

Ranks given as src, dst or peers are global ranks, as in torch. The names shared
with master-worker mode (all_reduce, broadcast, reduce, all_gather,
reduce_scatter) take either form: a list of DistributedTensor runs the master's
collective over worker nodes, a thd.Tensor (or a list of them) runs the
process-group collective.
"""

import atexit as _atexit
import builtins as _builtins
import datetime as _datetime
import os as _os
import pickle as _pickle
import sys as _sys
import warnings as _warnings

import numpy as _np

from . import _C
from ._C import DistributedTensor, ProcessGroup, ReduceOp, Tensor, Work
from .errors import Error, NotImplementedError, TypeError, ValueError

# torch.distributed's default timeout of a process group, in seconds.
_DEFAULT_TIMEOUT = 1800.0

# recv/irecv from whichever rank sends first (src=None).
_ANY_SOURCE = -1


def _seconds(timeout, op):
    """Seconds from a number or a datetime.timedelta."""
    if isinstance(timeout, _datetime.timedelta):
        return timeout.total_seconds()
    if isinstance(timeout, _builtins.bool) or not isinstance(timeout, (_builtins.int, _builtins.float)):
        raise TypeError(f"{op}: timeout is seconds (a number) or a datetime.timedelta, got {type(timeout).__name__}",
                        op=op)
    return _builtins.float(timeout)


def _tensor(t, op, name):
    """A thd.Tensor that is `t` or shares its memory: a torch tensor or NumPy array
    works in place, as it does with torch.distributed, with no copy."""
    if isinstance(t, Tensor):
        return t
    if isinstance(t, DistributedTensor):
        raise TypeError(f"{op}: {name} must be a local thd.Tensor (or a torch tensor or NumPy array); a "
                        "DistributedTensor lives on a worker node "
                        "(master-worker mode's collectives take a list of them)", op=op)
    if isinstance(t, _np.ndarray) or hasattr(t, "__dlpack__"):
        from . import _as_local  # defined after this module is imported
        return _as_local(t, op)
    raise TypeError(f"{op}: {name} must be a thd.Tensor, a torch tensor or a NumPy array (shared in place), "
                    f"got {type(t).__name__}", op=op)


def _tensors(ts, op, name):
    if ts is None:
        return []
    if not isinstance(ts, (list, tuple)):
        raise TypeError(f"{op}: {name} is a list of thd.Tensor, got {type(ts).__name__}", op=op)
    return [_tensor(t, op, f"{name}[{i}]") for i, t in enumerate(ts)]


def _op(op, name):
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{name}: op is a thd.ReduceOp (thd.ReduceOp.SUM, ...), got {type(op).__name__}", op=name)
    return op


def _rank_arg(rank, op, name):
    if isinstance(rank, _builtins.bool) or not hasattr(rank, "__index__"):
        raise TypeError(f"{op}: {name} is a global rank (an int), got {type(rank).__name__}", op=op)
    return rank.__index__()


def _outside(group):
    """Whether this rank is outside `group`, a live group of this job (None is the
    default group; anything else, or a destroyed group, is for the call to refuse)."""
    return (isinstance(group, ProcessGroup) and group.rank() == -1 and _C._pg_is_initialized()
            and _C._pg_get_rank(None) not in group.ranks)


def _not_member(group, op):
    """torch.distributed's rule for a rank outside `group`: the call warns and does
    nothing (returning None, or -1 from recv), so every rank can run the same code."""
    if not _outside(group):
        return False
    _warnings.warn(f"Running {op} on global rank {get_rank()} which does not belong to the given group.",
                   stacklevel=3)
    return True


def _master_worker(arg):
    """Whether a shared name's first argument is master-worker mode's: a list of
    DistributedTensor (an empty list only while no process group exists)."""
    if isinstance(arg, DistributedTensor):
        return True
    if isinstance(arg, (list, tuple)):
        if not arg:
            return not _C._pg_is_initialized()
        return any(isinstance(t, DistributedTensor) for t in arg)
    return False


# ---- the job ------------------------------------------------------------------------------


def init_process_group(backend=None, init_method=None, timeout=_DEFAULT_TIMEOUT, world_size=None, rank=None,
                       store=None, group_name="", pg_options=None, *, token=None, bind_host=None):
    """Joins the job as one of its ranks (torch.distributed.init_process_group).

    Args:
        backend: "tcp", "mpi", "ucx", "libfabric" or "nccl"; None takes $THD_BACKEND
            (``thdrun --backend`` sets it), else "tcp".
        init_method: "env://" (the default: RANK, WORLD_SIZE, MASTER_ADDR and
            MASTER_PORT, which thdrun sets; under mpirun its own variables),
            "tcp://host:port" or "file:///path" with rank and world_size.
        timeout: seconds or a ``datetime.timedelta`` (30 minutes): the rendezvous's
            limit and the deadline of every operation.
        world_size, rank: when init_method does not say (None or -1: it does).
        store, group_name, pg_options: torch's; only their defaults are accepted.
        token: the job's shared secret; None reads $THD_AUTH_TOKEN or the file named
            by $THD_AUTH_TOKEN_FILE (thdrun sets it). Keyword-only.
        bind_host: the address this rank listens on ("127.0.0.1"). Keyword-only.

    Raises thd.ValueError when already initialized or for an unknown backend,
    thd.TimeoutError when the rendezvous runs out of time. Releases the GIL while it
    waits for the other ranks.
    """
    if store is not None or group_name or pg_options is not None:
        raise NotImplementedError("init_process_group: store, group_name and pg_options are not supported; the "
                                  "rendezvous is init_method's", op="init_process_group")
    seconds = _seconds(timeout, "init_process_group")
    # Checked here so that a backend this build lacks fails before the rendezvous waits
    # for the other ranks (the C++ side resolves the same name: argument, $THD_BACKEND, tcp).
    name = backend or _os.environ.get("THD_BACKEND") or "tcp"
    if not is_backend_available(name):
        raise ValueError(f"init_process_group: backend {name!r} is not in this build of thd (it has "
                         f"{', '.join(_C._pg_available_backends())})", op="init_process_group")
    world_size = None if world_size is None or world_size == -1 else world_size
    rank = None if rank is None or rank == -1 else rank
    _C._pg_init(backend, init_method, seconds, world_size, rank, token, bind_host)


def is_initialized():
    """True between init_process_group() and destroy_process_group()."""
    return _C._pg_is_initialized()


def destroy_process_group(group=None):
    """Leaves the job: the default group and every group made from it are closed, and
    later operations on them raise thd.ValueError. Only group=None (the whole job) is
    supported. Releases the GIL while the connections close."""
    if group is not None:
        raise NotImplementedError("destroy_process_group: only group=None (the default group and every group made "
                                  "from it) is supported", op="destroy_process_group")
    _C._pg_destroy()


def _destroy_at_exit():
    try:
        _C._pg_destroy()
    except Error as e:  # nothing is left to raise it to
        print(f"thd: destroy_process_group at exit: {e}", file=_sys.stderr)


_atexit.register(_destroy_at_exit)


def get_rank(group=None):
    """This process's rank in `group` (None: the default group, i.e. its global rank);
    -1 when it is not a member. thd.ValueError before init_process_group()."""
    return _C._pg_get_rank(group)


def get_world_size(group=None):
    """The number of ranks in `group` (None: the default group); -1 on a rank that is
    not a member, as torch.distributed (group.size() still counts the members)."""
    if _outside(group):
        return -1
    return _C._pg_get_world_size(group)


def get_backend(group=None):
    """The backend of `group` (None: the default group): "tcp", "mpi", ..."""
    return _C._pg_get_backend(group)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None):
    """A group of the global ranks `ranks` (None: every rank), group rank i being
    ranks[i] (torch.distributed.new_group). Every rank of the job makes the call with
    the same list; a rank outside it gets a group whose rank() is -1, and its calls
    of the group's operations warn and do nothing, as torch.distributed's.

    timeout: seconds or a timedelta, the group's deadline (default: the job's). The
    backend is the job's: `backend`, if given, must name it."""
    if pg_options is not None:
        raise NotImplementedError("new_group: pg_options is not supported", op="new_group")
    if backend is not None and backend != get_backend():
        raise NotImplementedError(f"new_group: a group runs on the job's backend ({get_backend()}), not {backend}",
                                  op="new_group")
    if ranks is None:
        ranks = range(get_world_size())
    ranks = [_rank_arg(r, "new_group", "a rank") for r in ranks]
    return _C._pg_new_group(ranks, None if timeout is None else _seconds(timeout, "new_group"))


def get_group_rank(group, global_rank):
    """The rank in `group` of global rank `global_rank`; thd.ValueError when it is not a member."""
    return _C._pg_get_group_rank(group, global_rank)


def get_global_rank(group, group_rank):
    """The global rank of `group`'s rank `group_rank`."""
    return _C._pg_get_global_rank(group, group_rank)


def is_backend_available(backend):
    """True when this build of thd has the backend ("tcp", "mpi", ...)."""
    return backend in _C._pg_available_backends()


def is_mpi_available():
    """True when this build of thd has the mpi backend."""
    return is_backend_available("mpi")


def is_nccl_available():
    """True when this build of thd has the nccl backend."""
    return is_backend_available("nccl")


# ---- point to point (dst/src: global ranks) --------------------------------------------------


def send(tensor, dst, group=None, tag=0):
    """Sends `tensor` to global rank `dst`; returns when the tensor may be reused.
    The receiver's tensor must have the same dtype and number of elements.
    thd.ValueError for dst = this rank or a rank outside the group."""
    if _not_member(group, "send"):
        return None
    _C._pg_send(_tensor(tensor, "send", "tensor"), _rank_arg(dst, "send", "dst"), group, tag)


def recv(tensor, src=None, group=None, tag=0):
    """Receives into `tensor`, in place, from global rank `src` (None: any rank);
    returns the sender's global rank."""
    if _not_member(group, "recv"):
        return -1
    src = _ANY_SOURCE if src is None else _rank_arg(src, "recv", "src")
    return _C._pg_recv(_tensor(tensor, "recv", "tensor"), src, group, tag)


def isend(tensor, dst, group=None, tag=0):
    """As send, but returns a thd.Work at once; `tensor` belongs to it until it completes."""
    if _not_member(group, "isend"):
        return None
    return _C._pg_isend(_tensor(tensor, "isend", "tensor"), _rank_arg(dst, "isend", "dst"), group, tag)


def irecv(tensor, src=None, group=None, tag=0):
    """As recv, but returns a thd.Work at once (its source_rank() names the sender,
    as a rank of the group, after wait())."""
    if _not_member(group, "irecv"):
        return None
    src = _ANY_SOURCE if src is None else _rank_arg(src, "irecv", "src")
    return _C._pg_irecv(_tensor(tensor, "irecv", "tensor"), src, group, tag)


class P2POp:
    """P2POp(op, tensor, peer, group=None, tag=0): one point-to-point operation of a
    batch_isend_irecv (torch.distributed.P2POp). `op` is thd.isend or thd.irecv,
    `peer` a global rank."""

    def __init__(self, op, tensor, peer, group=None, tag=0):
        if op is not isend and op is not irecv:
            raise ValueError("P2POp: op must be thd.isend or thd.irecv, got " + getattr(op, "__name__", repr(op)),
                             op="P2POp")
        self.op = op
        self.tensor = _tensor(tensor, "P2POp", "tensor")
        self.peer = _rank_arg(peer, "P2POp", "peer")
        self.group = group
        self.tag = tag

    def __repr__(self):
        return f"P2POp(op={self.op.__name__}, peer={self.peer}, tag={self.tag})"


def batch_isend_irecv(p2p_op_list):
    """Posts every P2POp of the list, in order, and returns their thd.Work objects
    (torch.distributed.batch_isend_irecv). Every op of the batch uses one group; a
    list that is empty, holds something else or mixes groups is refused before
    anything is posted."""
    ops = list(p2p_op_list) if isinstance(p2p_op_list, (list, tuple)) else None
    if not ops:
        raise ValueError("batch_isend_irecv: expected a non-empty list of thd.P2POp", op="batch_isend_irecv")
    for i, p in enumerate(ops):
        if not isinstance(p, P2POp):
            raise TypeError(f"batch_isend_irecv: item {i} is a {type(p).__name__}, not a thd.P2POp",
                            op="batch_isend_irecv")
    group = ops[0].group
    if any(p.group is not group for p in ops):
        raise ValueError("batch_isend_irecv: every op of a batch must use the same group", op="batch_isend_irecv")
    # Checked before the first post, so that a bad op leaves nothing half posted.
    me = get_rank(group)
    for i, p in enumerate(ops):
        if get_group_rank(group, p.peer) == me:
            raise ValueError(f"batch_isend_irecv: op {i} names this rank ({p.peer}) as its peer",
                             op="batch_isend_irecv")
        if p.op is irecv and not p.tensor.is_contiguous():
            raise ValueError(f"batch_isend_irecv: op {i} receives into a non-contiguous tensor; receive into "
                             "t.contiguous() and copy back", op="batch_isend_irecv")
    works = [p.op(p.tensor, p.peer, p.group, p.tag) for p in ops]
    return works


def get_process_group_ranks(group):
    """The global ranks of `group`'s members, in group-rank order
    (torch.distributed.get_process_group_ranks)."""
    size = get_world_size() if group is None else group.size()
    return [get_global_rank(group, r) for r in range(size)]


# ---- collectives shared with master-worker mode ---------------------------------------------


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False)

    Process-group mode: `tensor` (a thd.Tensor) on every rank of the group becomes,
    in place, the op over every rank's. Returns a thd.Work when async_op, else None.

    Master-worker mode, all_reduce(tensors, op=ReduceOp.SUM): the tensors (a list of
    DistributedTensor, one per node) each become the op over all of them, in place;
    the workers run it among themselves. float16/bfloat16 sums accumulate in float32.
    """
    if _not_member(group, "all_reduce"):
        return None
    if _master_worker(tensor):
        return _C.all_reduce(tensor, op)
    return _C._pg_all_reduce(_tensor(tensor, "all_reduce", "tensor"), _op(op, "all_reduce"), group, async_op)


def broadcast(tensor, src=None, group=None, async_op=False, *, root_index=None):
    """broadcast(tensor, src, group=None, async_op=False)

    Process-group mode: global rank src's `tensor` is copied into every other
    rank's, in place.

    Master-worker mode, broadcast(tensors, root_index): tensors[root_index] is
    copied into every other DistributedTensor of the list, in place.
    """
    if _not_member(group, "broadcast"):
        return None
    if _master_worker(tensor):
        return _C.broadcast(tensor, src if root_index is None else root_index)
    if src is None:
        raise TypeError("broadcast: src (a global rank) is required", op="broadcast")
    return _C._pg_broadcast(_tensor(tensor, "broadcast", "tensor"), _rank_arg(src, "broadcast", "src"), group,
                            async_op)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, *, root_index=None):
    """reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False)

    Process-group mode: global rank dst's `tensor` becomes the op over every rank's;
    the others' are left as they are.

    Master-worker mode, reduce(tensors, root_index, op=ReduceOp.SUM):
    tensors[root_index] becomes the op over all of them.
    """
    if _not_member(group, "reduce"):
        return None
    if _master_worker(tensor):
        return _C.reduce(tensor, dst if root_index is None else root_index, op)
    if dst is None:
        raise TypeError("reduce: dst (a global rank) is required", op="reduce")
    return _C._pg_reduce(_tensor(tensor, "reduce", "tensor"), _rank_arg(dst, "reduce", "dst"), _op(op, "reduce"),
                         group, async_op)


def all_gather(tensor_list, tensor=None, group=None, async_op=False):
    """all_gather(tensor_list, tensor, group=None, async_op=False)

    Process-group mode: tensor_list[i] (one thd.Tensor per group rank) receives
    group rank i's `tensor`; sizes may differ between ranks but each entry must
    match its sender's. thd.ValueError for a wrong list length, naming it.

    Master-worker mode, all_gather(inputs) -> list: one new DistributedTensor per
    input, on its node, of shape [n, *input.shape]: every input in order.
    """
    if _not_member(group, "all_gather"):
        return None
    if tensor is None and _master_worker(tensor_list):
        return _C.all_gather(tensor_list)
    if tensor is None:
        raise TypeError("all_gather: process-group mode's form is all_gather(tensor_list, tensor); master-worker "
                        "mode's all_gather(inputs) takes a list of DistributedTensor", op="all_gather")
    return _C._pg_all_gather(_tensors(tensor_list, "all_gather", "tensor_list"),
                             _tensor(tensor, "all_gather", "tensor"), group, async_op)


def reduce_scatter(output, input_list=None, op=ReduceOp.SUM, group=None, async_op=False):
    """reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False)

    Process-group mode: input_list holds one tensor per group rank, each of output's
    size; `output` becomes the op over every rank's input_list[this group rank].

    Master-worker mode, reduce_scatter(inputs, op=ReduceOp.SUM) -> list: inputs of
    shape [n * k, ...]; output i, on input i's node, is the op over every input's
    block i.
    """
    if _not_member(group, "reduce_scatter"):
        return None
    if _master_worker(output):
        # Master-worker mode's op is its second positional argument.
        return _C.reduce_scatter(output, input_list if isinstance(input_list, ReduceOp) else op)
    return _C._pg_reduce_scatter(_tensor(output, "reduce_scatter", "output"),
                                 _tensors(input_list, "reduce_scatter", "input_list"), _op(op, "reduce_scatter"),
                                 group, async_op)


# ---- collectives of process-group mode only -------------------------------------------------


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    """On global rank dst, gather_list[i] (one per group rank, each of tensor's
    size) receives group rank i's `tensor`; the other ranks pass gather_list=None."""
    if _not_member(group, "gather"):
        return None
    return _C._pg_gather(_tensor(tensor, "gather", "tensor"), _tensors(gather_list, "gather", "gather_list"),
                         _rank_arg(dst, "gather", "dst"), group, async_op)


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    """Group rank i's `tensor` receives global rank src's scatter_list[i] (one per
    group rank, each of tensor's size); the other ranks pass scatter_list=None."""
    if _not_member(group, "scatter"):
        return None
    return _C._pg_scatter(_tensor(tensor, "scatter", "tensor"), _tensors(scatter_list, "scatter", "scatter_list"),
                          _rank_arg(src, "scatter", "src"), group, async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """input_tensor_list[j] goes to group rank j, which receives it as its
    output_tensor_list[this group rank]; one tensor per group rank in each list."""
    if _not_member(group, "all_to_all"):
        return None
    return _C._pg_all_to_all(_tensors(output_tensor_list, "all_to_all", "output_tensor_list"),
                             _tensors(input_tensor_list, "all_to_all", "input_tensor_list"), group, async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    """Rows (dim 0) of `input`, split by input_split_sizes (None: equal parts), go to
    the group ranks in order; output's rows, split by output_split_sizes, come from them."""
    if _not_member(group, "all_to_all_single"):
        return None
    return _C._pg_all_to_all_single(_tensor(output, "all_to_all_single", "output"),
                                    _tensor(input, "all_to_all_single", "input"), list(output_split_sizes or []),
                                    list(input_split_sizes or []), group, async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output_tensor (group size x input's elements) receives every group rank's
    input_tensor, in group-rank order."""
    if _not_member(group, "all_gather_into_tensor"):
        return None
    return _C._pg_all_gather_into_tensor(_tensor(output_tensor, "all_gather_into_tensor", "output_tensor"),
                                         _tensor(input_tensor, "all_gather_into_tensor", "input_tensor"), group,
                                         async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """`input` holds group-size blocks of output's size; output becomes the op over
    every rank's block of this group rank."""
    if _not_member(group, "reduce_scatter_tensor"):
        return None
    return _C._pg_reduce_scatter_tensor(_tensor(output, "reduce_scatter_tensor", "output"),
                                        _tensor(input, "reduce_scatter_tensor", "input"),
                                        _op(op, "reduce_scatter_tensor"), group, async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Returns once every rank of the group has called it (device_ids: torch's, ignored)."""
    if _not_member(group, "barrier"):
        return None
    del device_ids
    return _C._pg_barrier(group, async_op)


# ---- objects (pickled, as torch.distributed's *_object functions) ---------------------------
# pickle runs code on loading: as with torch, use these only among ranks you trust.


def broadcast_object_list(object_list, src=0, group=None, device=None):
    """Global rank src's object_list (any picklable objects) replaces every other
    rank's, in place (resized to src's length)."""
    if _not_member(group, "broadcast_object_list"):
        return None
    del device
    src = _rank_arg(src, "broadcast_object_list", "src")
    mine = _pickle.dumps(list(object_list)) if get_rank() == src else b""
    got = _C._pg_broadcast_bytes(mine, src, group)
    if get_rank() != src:
        object_list[:] = _pickle.loads(got)


def all_gather_object(object_list, obj, group=None):
    """object_list becomes every group rank's `obj`, in group-rank order (resized
    to the group's size)."""
    if _not_member(group, "all_gather_object"):
        return None
    object_list[:] = [_pickle.loads(b) for b in _C._pg_all_gather_bytes(_pickle.dumps(obj), group)]


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    """On global rank dst, object_gather_list becomes every group rank's `obj`, in
    group-rank order; the other ranks pass None."""
    if _not_member(group, "gather_object"):
        return None
    dst = _rank_arg(dst, "gather_object", "dst")
    got = _C._pg_gather_bytes(_pickle.dumps(obj), dst, group)
    if get_rank() == dst:
        if object_gather_list is None:
            raise ValueError("gather_object: the dst rank needs an object_gather_list", op="gather_object",
                             rank=dst)
        object_gather_list[:] = [_pickle.loads(b) for b in got]


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=0, group=None):
    """Group rank i's scatter_object_output_list[0] becomes global rank src's
    scatter_object_input_list[i] (one object per group rank)."""
    if _not_member(group, "scatter_object_list"):
        return None
    src = _rank_arg(src, "scatter_object_list", "src")
    inputs = []
    if get_rank() == src:
        inputs = [_pickle.dumps(o) for o in (scatter_object_input_list or [])]
    got = _pickle.loads(_C._pg_scatter_bytes(inputs, src, group))
    if scatter_object_output_list:
        scatter_object_output_list[0] = got
    else:
        scatter_object_output_list.append(got)


# ---- thd.Work ---------------------------------------------------------------------------


def _work_exception(self):
    """The error of a failed operation (a thd exception), None while it is pending or
    when it succeeded."""
    try:
        self._raise_error()
    except Error as e:
        return e
    return None


def _work_wait(self, timeout=None):
    """wait(timeout=None) -> True: blocks until the operation completes and raises its
    error if it failed. timeout: seconds or a datetime.timedelta; past it
    thd.TimeoutError, and the operation stays pending (its own deadline still
    applies). Releases the GIL while it waits."""
    return self._wait(None if timeout is None else _seconds(timeout, "Work.wait"))


Work.exception = _work_exception
Work.wait = _work_wait
Work.__module__ = "thd"
ProcessGroup.__module__ = "thd"

__all__ = [
    "ProcessGroup", "Work", "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce",
    "all_to_all", "all_to_all_single", "barrier", "broadcast", "broadcast_object_list", "destroy_process_group",
    "gather", "gather_object", "get_backend", "get_global_rank", "get_group_rank", "get_rank", "get_world_size",
    "init_process_group", "irecv", "is_backend_available", "is_initialized", "is_mpi_available",
    "is_nccl_available", "isend", "new_group", "recv", "reduce", "reduce_scatter", "reduce_scatter_tensor",
    "scatter", "scatter_object_list", "send", "P2POp", "batch_isend_irecv", "get_process_group_ranks",
]
