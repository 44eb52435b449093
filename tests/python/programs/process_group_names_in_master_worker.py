"""Master-worker mode through the names it shares with process-group mode: a list of
DistributedTensor still runs the master's collective over worker nodes, in every
form the master-worker API has (positional op, root_index by keyword), and the
process-group names refuse a DistributedTensor clearly."""

import numpy as np

import thd

thd.init_master_worker(timeout=60)
assert not thd.is_initialized()  # no process group in master-worker mode


def per_node(make):
    out = []
    for n in range(thd.num_nodes()):
        with thd.node(n):
            out.append(make(n))
    return out


def same(dt, expected):
    got = dt.get().numpy()
    assert np.allclose(got, expected), f"{got} != {expected}"


ts = per_node(lambda n: thd.full((2,), float(n + 1)))
assert thd.all_reduce(ts, thd.ReduceOp.MAX) is None
same(ts[0], [2.0, 2.0])
bs = per_node(lambda n: thd.full((2,), float(n)))
thd.broadcast(bs, root_index=1)
same(bs[0], [1.0, 1.0])
rs = per_node(lambda n: thd.full((1,), float(n + 2)))
thd.reduce(rs, 1, thd.ReduceOp.PRODUCT)
same(rs[1], [6.0])
same(rs[0], [2.0])
gathered = thd.all_gather(per_node(lambda n: thd.full((1,), float(n))))
same(gathered[1], [[0.0], [1.0]])
scattered = thd.reduce_scatter(per_node(lambda n: thd.arange(4, dtype=thd.float32) * float(n + 1)),
                               thd.ReduceOp.MAX)
same(scattered[0], [0.0, 2.0])
same(scattered[1], [4.0, 6.0])

# Process-group forms on the master: no process group, and no DistributedTensor.
try:
    thd.all_reduce(thd.from_numpy(np.ones(2, dtype=np.float32)))
    raise AssertionError("a local tensor ran a collective without a process group")
except thd.ValueError as e:
    assert "not initialized" in str(e), e
try:
    thd.gather(ts[0], None, 0)
    raise AssertionError("gather took a DistributedTensor")
except thd.TypeError as e:
    assert "DistributedTensor" in str(e) and "thd.Tensor" in str(e), e

thd.shutdown()
print("PASS process_group_names_in_master_worker.py")
