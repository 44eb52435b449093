"""Errors in a master-worker job: bad calls raise at the call site with the C++
context; an error only the worker can see raises thd.RemoteError at the sync point."""

import numpy as np

import thd


def raises(cls, call):
    try:
        call()
    except cls as e:
        return e
    raise AssertionError(f"{call} did not raise {cls.__name__}")


thd.init_master_worker(timeout=60)
a = thd.ones(2, 3)

# Shapes that do not broadcast: at the call site, naming the op and the node.
e = raises(thd.ShapeError, lambda: a + thd.ones(4))
assert isinstance(e, ValueError)
assert e.op == "add" and e.node == 0, (e.op, e.node)
e = raises(thd.ShapeError, lambda: a.view(4))
assert e.op == "view"
e = raises(thd.ShapeError, lambda: a @ a)
assert isinstance(e, ValueError)

# A node out of range.
e = raises(thd.IndexError, lambda: thd.zeros(2, node=5))
assert isinstance(e, IndexError) and "out of range" in e.message
raises(thd.IndexError, lambda: a.to_node(2))
raises(thd.IndexError, lambda: thd.tensor([1.0]).dist_send(node=7))
raises(thd.IndexError, lambda: a.transpose(0, 5))
with thd.node(9):
    raises(thd.IndexError, lambda: thd.ones(1))

# Operands on different nodes.
e = raises(thd.Error, lambda: a + thd.ones(2, 3, node=1))
assert "node" in str(e)

# A dtype an op refuses.
raises(thd.TypeError, lambda: thd.arange(4).mean())
raises(thd.TypeError, lambda: a.index_select(0, thd.ones(1)))

# Only the worker sees that index 5 is out of range: RemoteError at get().
bad = a.index_select(0, thd.tensor([0, 5]).dist_send())
follow = bad * 2  # computed from the failed op: poisoned too
e = raises(thd.RemoteError, bad.get)
assert e.op == "index_select" and e.node == 0 and e.op_id > 0, (e.op, e.node, e.op_id)
assert "5" in e.message
e2 = raises(thd.RemoteError, follow.numpy)
assert e2.op == "index_select"
# The worker keeps working, and an error already raised is not raised again.
assert (a * 2).sum().item() == 12.0
thd.synchronize()

# The job goes on after every error above.
assert thd.num_nodes() == 2 and (a + a.to_node(1).to_node(0)).sum().item() == 12.0
thd.shutdown()
print("PASS errors.py")
