"""Process-group mode: every rank runs this program (thdrun -n 4, or mpirun -n 4
with THD_BACKEND=mpi) and checks every collective's values against what torch's
semantics give, a subgroup, async Work, object collectives and the errors. Each
rank prints 'PASS process_group.py rank <r>' when all its checks held."""

import datetime
import os
import threading
import time

import numpy as np

import thd


def same(t, expected):
    got = np.asarray(t)
    assert got.shape == np.shape(expected) and np.allclose(got, expected), f"rank {r}: {got} != {expected}"


def local(values, dtype=np.float32):
    return thd.from_numpy(np.array(values, dtype=dtype))


def raises(kind, text, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except kind as e:
        assert text in str(e), f"{kind.__name__} without '{text}': {e}"
        return e
    raise AssertionError(f"{getattr(fn, '__name__', fn)} did not raise {kind.__name__}")


# ---- the job -------------------------------------------------------------------------------
assert not thd.is_initialized()
raises(thd.ValueError, "not initialized", thd.get_rank)
thd.init_process_group(timeout=datetime.timedelta(seconds=60))
assert thd.is_initialized()
r, n = thd.get_rank(), thd.get_world_size()
assert n == 4, n
assert r == int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "-1"))), r
assert thd.get_backend() == os.environ.get("THD_BACKEND", "tcp"), thd.get_backend()
assert thd.is_backend_available("tcp") and not thd.is_backend_available("gloo")
raises(thd.ValueError, "already initialized", thd.init_process_group)

# ---- all_reduce, in place, every op kind, blocking and async ---------------------------------
a = np.full(3, float(r), dtype=np.float32)
t = thd.from_numpy(a)
assert thd.all_reduce(t) is None
same(a, [6.0, 6.0, 6.0])  # the NumPy array shares the tensor's memory
# NumPy arrays and torch tensors work in place themselves, as with torch.distributed.
direct = np.full(2, float(r), dtype=np.float32)
thd.all_reduce(direct)
same(direct, [6.0, 6.0])
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    tt = torch.full((2,), float(r))
    thd.all_reduce(tt, op=thd.ReduceOp.MAX)
    assert tt.tolist() == [3.0, 3.0], tt
    gathered = [torch.zeros(1, dtype=torch.int64) for _ in range(n)]
    thd.all_gather(gathered, torch.tensor([r * 5]))
    assert [x.item() for x in gathered] == [0, 5, 10, 15], gathered
    flags = torch.tensor([r == 1, False])  # bool: no DLPack in older torch, shared through NumPy
    thd.all_reduce(flags, op=thd.ReduceOp.MAX)
    assert flags.tolist() == [True, False], flags
raises(thd.TypeError, "must be a thd.Tensor, a torch tensor or a NumPy array", thd.all_reduce, [1.0])
m = local([r, -r], np.int64)
thd.all_reduce(m, op=thd.ReduceOp.MAX)
same(m, [3, 0])
p = local([r + 1.0], np.float64)
thd.all_reduce(p, thd.ReduceOp.PRODUCT)
same(p, [24.0])
avg = local([2.0 * r])
work = thd.all_reduce(avg, op=thd.ReduceOp.AVG, async_op=True)
assert isinstance(work, thd.Work)
assert work.wait(timeout=30) is True and work.is_completed() and work.exception() is None
same(avg, [3.0])

# ---- broadcast and reduce (src/dst: global ranks) -------------------------------------------
b = local([r * 10.0, r * 10.0 + 1])
thd.broadcast(b, src=2)
same(b, [20.0, 21.0])
red = local([r + 1.0])
thd.reduce(red, dst=1, op=thd.ReduceOp.SUM)
same(red, [10.0] if r == 1 else [r + 1.0])

# ---- list forms: sizes may differ between ranks ------------------------------------------------
gathered = [thd.from_numpy(np.zeros(i + 1, dtype=np.float32)) for i in range(n)]
thd.all_gather(gathered, local([float(r)] * (r + 1)))
for i in range(n):
    same(gathered[i], [float(i)] * (i + 1))

gather_list = [local([0.0, 0.0]) for _ in range(n)] if r == 3 else None
thd.gather(local([r, r * r]), gather_list, dst=3)
if r == 3:
    for i in range(n):
        same(gather_list[i], [i, i * i])

mine = local([0.0, 0.0])
scatter_list = [local([i, -i]) for i in range(n)] if r == 0 else None
thd.scatter(mine, scatter_list, src=0)
same(mine, [r, -r])

out = local([0.0, 0.0])
thd.reduce_scatter(out, [local([r * 10.0 + j, 1.0]) for j in range(n)], op=thd.ReduceOp.SUM)
same(out, [10.0 * (0 + 1 + 2 + 3) + n * r, 4.0])

outs = [local([0]) for _ in range(n)]
thd.all_to_all(outs, [local([r * 100 + j]) for j in range(n)])
for i in range(n):
    same(outs[i], [i * 100 + r])

flat = thd.from_numpy(np.zeros((n, 2), dtype=np.float32))
thd.all_gather_into_tensor(flat, local([r, r + 0.5]))
same(flat, [[i, i + 0.5] for i in range(n)])
rs = local([0.0])
thd.reduce_scatter_tensor(rs, local([r + j for j in range(n)]))
same(rs, [sum(i + r for i in range(n))])
single = local([0] * n)
thd.all_to_all_single(single, local([r * 10 + j for j in range(n)]))
same(single, [i * 10 + r for i in range(n)])

thd.barrier()
assert thd.barrier(async_op=True).wait(timeout=30)

# ---- point to point: blocking, any source, isend/irecv Work -------------------------------------
right, left = (r + 1) % n, (r - 1) % n
got = local([0.0, 0.0, 0.0])
if r % 2 == 0:
    thd.send(local([r, r, r]), dst=right)
    assert thd.recv(got, src=left) == left
else:
    assert thd.recv(got) == left  # src=None: any rank; returns the sender
    thd.send(local([r, r, r]), right)
same(got, [left] * 3)

inbox = local([0, 0], np.int64)
recv_work = thd.irecv(inbox, src=left, tag=5)
send_work = thd.isend(local([r, 7 * r], np.int64), dst=right, tag=5)
for w in (send_work, recv_work):
    assert w.wait(timeout=30) and w.is_completed() and w.exception() is None
assert recv_work.source_rank() == left
same(inbox, [left, 7 * left])

# A Work's own wait timeout: nothing is sent on tag 9 until after the barrier.
late = local([0.0])
if r == 0:
    pending = thd.irecv(late, src=1, tag=9)
    raises(thd.TimeoutError, "", pending.wait, timeout=0.2)
    assert not pending.is_completed()
thd.barrier()
if r == 1:
    thd.send(local([42.0]), dst=0, tag=9)
if r == 0:
    assert pending.wait(timeout=datetime.timedelta(seconds=30))
    same(late, [42.0])

# The GIL is released while a call waits: another Python thread runs meanwhile.
if r == 0:
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    time.sleep(0.05)
    before = len(ticks)
    thd.recv(local([0.0]), src=1, tag=21)  # rank 1 sends 0.5 s later
    during = len(ticks) - before
    stop.set()
    ticker.join()
    assert during > 20, f"the other thread ran only {during} times while recv waited"
elif r == 1:
    time.sleep(0.5)
    thd.send(local([1.0]), dst=0, tag=21)
thd.barrier()

# ---- a subgroup: global ranks 0 and 2 ------------------------------------------------------------
evens = thd.new_group([0, 2])
assert isinstance(evens, thd.ProcessGroup) and evens.ranks == [0, 2] and evens.size() == 2
assert thd.get_world_size(evens) == (2 if r in (0, 2) else -1)
assert thd.get_rank(evens) == ({0: 0, 2: 1}.get(r, -1)) == evens.rank()
if r in (0, 2):
    assert thd.get_group_rank(evens, 2) == 1 and thd.get_global_rank(evens, 1) == 2
    g = local([r + 1.0])
    thd.all_reduce(g, group=evens)
    same(g, [4.0])
    gb = local([float(r)])
    thd.broadcast(gb, src=2, group=evens)  # src is a global rank
    same(gb, [2.0])
    raises(thd.ValueError, "not in the group", thd.broadcast, gb, 1, evens)
    glist = [local([0.0]) for _ in range(2)]
    thd.all_gather(glist, local([r * 3.0]), group=evens)
    same(glist[0], [0.0])
    same(glist[1], [6.0])
else:
    # torch.distributed's rule: a rank outside the group warns and does nothing.
    import warnings
    outside = local([1.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert thd.all_reduce(outside, group=evens) is None
        assert thd.broadcast(outside, src=0, group=evens, async_op=True) is None
        assert thd.recv(outside, src=0, group=evens) == -1
        assert thd.barrier(group=evens) is None
        objs = ["untouched"]
        assert thd.broadcast_object_list(objs, src=0, group=evens) is None
    same(outside, [1.0])
    assert objs == ["untouched"]
    assert len(caught) == 5 and all("does not belong to the given group" in str(w.message) for w in caught), \
        [str(w.message) for w in caught]
    assert thd.get_world_size(evens) == -1 and evens.size() == 2
everyone = thd.new_group()
assert everyone.size() == n
assert thd.get_process_group_ranks(evens) == [0, 2] and thd.get_process_group_ranks(None) == list(range(n))

# ---- batch_isend_irecv: a ring exchange in both directions ------------------------------------------
right, left = (r + 1) % n, (r - 1) % n
from_left, from_right = local([0.0, 0.0]), local([0.0, 0.0])
works = thd.batch_isend_irecv([
    thd.P2POp(thd.irecv, from_left, left, tag=40),
    thd.P2POp(thd.irecv, from_right, right, tag=41),
    thd.P2POp(thd.isend, local([r, r]), right, tag=40),
    thd.P2POp(thd.isend, local([-r, -r]), left, tag=41),
])
assert len(works) == 4 and all(isinstance(w, thd.Work) for w in works)
for w in works:
    w.wait()
same(from_left, [left, left])
same(from_right, [-right, -right])
raises(thd.ValueError, "thd.isend or thd.irecv", thd.P2POp, thd.send, local([1.0]), right)
raises(thd.ValueError, "non-empty list", thd.batch_isend_irecv, [])
raises(thd.TypeError, "not a thd.P2POp", thd.batch_isend_irecv, [thd.P2POp(thd.isend, local([1.0]), right), 3])
raises(thd.ValueError, "names this rank", thd.batch_isend_irecv,
       [thd.P2POp(thd.isend, local([1.0]), right), thd.P2POp(thd.isend, local([1.0]), r)])
raises(thd.ValueError, "same group", thd.batch_isend_irecv,
       [thd.P2POp(thd.isend, local([1.0]), right), thd.P2POp(thd.isend, local([1.0]), right, group=everyone)])
thd.barrier()

# ---- objects ----------------------------------------------------------------------------------------
objs = [{"lr": 0.1}, "two", 3] if r == 1 else [None]
thd.broadcast_object_list(objs, src=1)
assert objs == [{"lr": 0.1}, "two", 3], objs
names = []
thd.all_gather_object(names, f"rank{r}")
assert names == [f"rank{i}" for i in range(n)], names
collected = [] if r == 2 else None
thd.gather_object((r, "x"), collected, dst=2)
if r == 2:
    assert collected == [(i, "x") for i in range(n)], collected
received = [None]
thd.scatter_object_list(received, [[i] * i for i in range(n)] if r == 3 else None, src=3)
assert received == [[r] * r], received

# ---- errors --------------------------------------------------------------------------------------
e = raises(thd.ValueError, "own rank", thd.send, local([1.0]), r)
assert e.op == "send", e.op
raises(thd.ValueError, "own rank", thd.recv, local([1.0]), r)
raises(thd.ValueError, f"rank {n}", thd.send, local([1.0]), n)
raises(thd.ValueError, f"rank {n + 3}", thd.broadcast, local([1.0]), n + 3)
raises(thd.TypeError, "thd.Tensor", thd.all_reduce, "not a tensor")
raises(thd.TypeError, "ReduceOp", thd.all_reduce, local([1.0]), "sum")
raises(thd.TypeError, "ProcessGroup", thd.all_reduce, local([1.0]), thd.ReduceOp.SUM, "world")
raises(thd.TypeError, "timeout", thd.all_reduce(local([1.0]), async_op=True).wait, "soon")
raises(thd.ValueError, f"tensor_list has {n - 1} tensors but must have {n}", thd.all_gather,
       [local([0.0])] * (n - 1), local([1.0]))
raises(thd.ValueError, f"tensor_list[{r}] has 2 elements", thd.all_gather, [local([0.0, 0.0]) for _ in range(n)],
       local([1.0]))
raises(thd.ValueError, "input_list[0] has 2 elements", thd.reduce_scatter, local([0.0]),
       [local([1.0, 2.0]) for _ in range(n)])
# A receive of another size than the message's fails naming both; point-to-point
# keeps working after it.
if r == 0:
    thd.send(local([1.0, 2.0, 3.0, 4.0]), dst=1, tag=11)
    thd.send(local([5.0]), dst=1, tag=12)
elif r == 1:
    raises(thd.ValueError, "4 elements", thd.recv, local([0.0, 0.0, 0.0]), 0, tag=11)
    after = local([0.0])
    thd.recv(after, src=0, tag=12)
    same(after, [5.0])
if r == 2:
    failed = thd.irecv(local([0], np.int32), src=3, tag=13)
    raises(thd.TypeError, "int32", failed.wait, 30)
    assert failed.is_completed() and isinstance(failed.exception(), thd.TypeError)
    assert not failed.is_success()
elif r == 3:
    thd.send(local([1.0]), dst=2, tag=13)  # float32 where int32 is expected

thd.barrier()
thd.destroy_process_group()
assert not thd.is_initialized()
raises(thd.ValueError, "shut down", thd.all_reduce, local([1.0]), group=evens)
raises(thd.ValueError, "not initialized", thd.get_rank)
print(f"PASS process_group.py rank {r}")
