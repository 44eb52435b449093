"""A worker's error raises the thd.RemoteError subclass of its kind: a remote out of
memory is caught as thd.RemoteOutOfMemoryError (and MemoryError), an index out of
range as thd.RemoteIndexError, and tensors poisoned by a failure raise its kind."""

import thd


def raises(cls, call):
    try:
        call()
    except cls as e:
        return e
    raise AssertionError(f"{call} did not raise {cls.__name__}")


thd.init_master_worker(timeout=60)

# 4 TiB of float32 on node 1: more than the node may hold.
huge = thd.zeros(1 << 40, node=1)
e = raises(thd.RemoteOutOfMemoryError, huge.sum().item)  # huge.get() would need 4 TiB here
assert isinstance(e, thd.RemoteError) and isinstance(e, MemoryError), type(e).__mro__
assert e.kind == "out_of_memory", e.kind
assert e.op == "zeros" and e.node == 1 and e.op_id > 0, (e.op, e.node, e.op_id)
assert str(4 << 40) in e.message, e.message
# Caught as the base class too, and the worker keeps serving.
raises(thd.RemoteError, (huge + 1).sum().item)
assert thd.ones(3, node=1).sum().item() == 3.0

# An index only the worker sees out of range, and a tensor computed from it.
a = thd.ones(2, 3)
bad = a.index_select(0, thd.tensor([0, 5]).dist_send())
follow = (bad * 2).to_node(1)
e = raises(thd.RemoteIndexError, bad.get)
assert isinstance(e, IndexError) and e.kind == "index", (type(e), e.kind)
e = raises(thd.RemoteIndexError, follow.get)
assert e.op == "index_select" and e.node == 0, (e.op, e.node)
# Not caught as another kind.
try:
    bad.get()
except thd.RemoteOutOfMemoryError:
    raise AssertionError("an index error was raised as an out of memory")
except thd.RemoteError:
    pass
thd.synchronize()
thd.shutdown()
print("PASS remote_error_kinds.py")
