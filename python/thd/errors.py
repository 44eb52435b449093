"""The exceptions thd raises, mirroring the C++ hierarchy of ``include/thd/error.h``.

Every one derives from :class:`Error` (a ``RuntimeError``) and, where Python has a
matching built-in, from that too: a bad shape raises :class:`ShapeError`, which
``except ValueError`` also catches. Each carries what the C++ error knew of where it
happened: ``op`` (the operation that failed), ``node`` (the worker node involved),
``rank`` (the DataChannel rank that raised it) and ``peer`` (the remote rank
involved), each ``None`` when unknown; ``message`` is the message without op and
location, ``str(e)`` the full text.
"""

import builtins

__all__ = [
    "Error",
    "ValueError",
    "ShapeError",
    "TypeError",
    "IndexError",
    "TimeoutError",
    "ConnectionError",
    "PeerLost",
    "WorkerLost",
    "RemoteError",
    "RemoteOutOfMemoryError",
    "RemoteValueError",
    "RemoteShapeError",
    "RemoteTypeError",
    "RemoteIndexError",
    "RemoteTimeoutError",
    "RemoteConnectionError",
    "RemoteNotImplementedError",
    "RemoteCudaError",
    "NotImplementedError",
    "CudaError",
    "OutOfMemoryError",
    "HostOutOfMemoryError",
    "AuthError",
]


class Error(RuntimeError):
    """Base of every error thd raises (C++ ``thd::Error``).

    Attributes: ``op``, ``node``, ``rank``, ``peer`` (``None`` when unknown),
    ``message`` (the message alone), ``file`` and ``line`` (where in thd it was
    raised, ``None`` when unknown).
    """

    def __init__(self, message="", op=None, node=None, rank=None, peer=None, file=None, line=None, what=None):
        super().__init__(what if what is not None else message)
        self.message = message
        self.op = op
        self.node = node
        self.rank = rank
        self.peer = peer
        self.file = file
        self.line = line

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class ValueError(Error, builtins.ValueError):
    """A value is outside what the op accepts (C++ ``thd::ValueError``)."""


class ShapeError(ValueError):
    """Shapes do not fit together: broadcasting, matmul, view (C++ ``thd::ShapeError``)."""


class TypeError(Error, builtins.TypeError):
    """A dtype the op does not support, or dtypes that do not fit together (C++ ``thd::TypeError``)."""


class IndexError(Error, builtins.IndexError):
    """An index, dimension or node out of range (C++ ``thd::IndexError``)."""


class TimeoutError(Error, builtins.TimeoutError):
    """A wait that ran past its deadline (C++ ``thd::TimeoutError``)."""


class ConnectionError(Error, builtins.ConnectionError):
    """A connection could not be made or was broken (C++ ``thd::ConnectionError``)."""


class PeerLost(ConnectionError):
    """A peer (``peer``) disappeared; operations involving it fail with this (C++ ``thd::PeerLost``)."""


class WorkerLost(PeerLost):
    """A worker node (``node``) died or its connection broke; every operation on that
    node fails with this, other nodes keep working (C++ ``thd::WorkerLost``)."""


class RemoteError(Error):
    """An op failed on a worker (C++ ``thd::RemoteError``).

    Raised on the master at the next sync point that depends on it (``get()``,
    ``item()``, :func:`thd.synchronize`); ``op`` is the op that failed, ``node`` its
    node, ``message`` the worker's original error and ``op_id`` the op's id in the
    session (ids count ops from 1). ``kind`` names the kind of the worker's error
    (``"out_of_memory"``, ``"shape"``, ...; ``"generic"`` for any other), and the
    error raised is the subclass of that kind (:class:`RemoteOutOfMemoryError`, ...),
    which ``except RemoteError`` also catches.
    """

    kind = "generic"

    def __init__(self, *args, op_id=0, kind=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.op_id = op_id
        if kind is not None:
            self.kind = kind


class RemoteOutOfMemoryError(RemoteError, builtins.MemoryError):
    """A worker ran out of memory: host or GPU, or its session's limit (C++ ``thd::RemoteOutOfMemoryError``)."""

    kind = "out_of_memory"


class RemoteValueError(RemoteError, builtins.ValueError):
    """A worker's op raised a ``ValueError`` (C++ ``thd::RemoteValueError``)."""

    kind = "value"


class RemoteShapeError(RemoteValueError):
    """A worker's op raised a ``ShapeError`` (C++ ``thd::RemoteShapeError``)."""

    kind = "shape"


class RemoteTypeError(RemoteError, builtins.TypeError):
    """A worker's op raised a ``TypeError`` (C++ ``thd::RemoteTypeError``)."""

    kind = "type"


class RemoteIndexError(RemoteError, builtins.IndexError):
    """A worker's op raised an ``IndexError`` (C++ ``thd::RemoteIndexError``)."""

    kind = "index"


class RemoteTimeoutError(RemoteError, builtins.TimeoutError):
    """A worker's op ran past a deadline (C++ ``thd::RemoteTimeoutError``)."""

    kind = "timeout"


class RemoteConnectionError(RemoteError, builtins.ConnectionError):
    """A worker's op lost a connection, to a peer node for one (C++ ``thd::RemoteConnectionError``)."""

    kind = "connection"


class RemoteNotImplementedError(RemoteError, builtins.NotImplementedError):
    """A worker has no implementation of the op for its arguments (C++ ``thd::RemoteNotImplementedError``)."""

    kind = "not_implemented"


class RemoteCudaError(RemoteError):
    """A CUDA call failed on a worker (C++ ``thd::RemoteCudaError``)."""

    kind = "cuda"


class NotImplementedError(Error, builtins.NotImplementedError):
    """The op exists but not for these arguments' device in this build (C++ ``thd::NotImplementedError``)."""


class CudaError(Error):
    """A CUDA call failed (C++ ``thd::CudaError``)."""


class OutOfMemoryError(CudaError):
    """A CUDA device ran out of memory (C++ ``thd::OutOfMemoryError``)."""


class HostOutOfMemoryError(Error, builtins.MemoryError):
    """The host could not give a tensor the memory it asked for, or a worker's tensors
    would take it past its session's memory limit (C++ ``thd::HostOutOfMemoryError``)."""


class AuthError(Error):
    """A peer failed to prove the shared secret, or this process has none (C++ ``thd::AuthError``)."""
