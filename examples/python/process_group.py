"""Process-group mode from Python, as a torch.distributed program would be written:
every rank runs this same program on local tensors.

    thdrun -n 4 python3 examples/python/process_group.py   # 4 ranks, tcp
    thdrun -n 4 --backend ucx python3 examples/python/process_group.py

(with PYTHONPATH=build/python in a build tree). Rank 0 prints its results next to the
values expected and how many of every other rank's were right; the program exits
1 if any rank got a wrong one.
"""

import sys

import numpy as np

import thd

thd.init_process_group()  # env:// from thdrun; $THD_BACKEND (thdrun --backend), else tcp
rank, world = thd.get_rank(), thd.get_world_size()
checks = []  # (what, got, expected) on this rank


def check(what, got, expected):
    checks.append((what, np.asarray(got).tolist(), np.asarray(expected).tolist()))


# all_reduce: in place, the sum over every rank (the NumPy array shares the tensor's memory).
grad = np.full(4, float(rank + 1), dtype=np.float32)
thd.all_reduce(thd.from_numpy(grad))
check("all_reduce(sum of rank+1)", grad, np.full(4, world * (world + 1) / 2))

# broadcast from the last rank, asynchronously: a Work to wait for.
weights = np.full(2, float(rank), dtype=np.float32)
work = thd.broadcast(thd.from_numpy(weights), src=world - 1, async_op=True)
work.wait()
check(f"broadcast(src={world - 1})", weights, np.full(2, world - 1.0))

# all_gather: one tensor per rank.
gathered = [np.zeros(1, dtype=np.int64) for _ in range(world)]
thd.all_gather([thd.from_numpy(g) for g in gathered], thd.tensor([rank * 10]))
check("all_gather(10 * rank)", np.concatenate(gathered), np.arange(world) * 10)

# A ring of isend/irecv.
inbox = np.zeros(1, dtype=np.float64)
works = [thd.irecv(thd.from_numpy(inbox), src=(rank - 1) % world),
         thd.isend(thd.tensor([float(rank)], dtype=thd.float64), dst=(rank + 1) % world)]
for w in works:
    w.wait()
check("irecv from the left neighbour", inbox, [float((rank - 1) % world)])

# A subgroup of the even ranks.
evens = thd.new_group(list(range(0, world, 2)))
if evens.rank() >= 0:
    x = np.ones(1, dtype=np.float32)
    thd.all_reduce(thd.from_numpy(x), group=evens)
    check("all_reduce over the even ranks", x, [float(evens.size())])

# Objects travel pickled: every rank's checks reach rank 0.
reports = []
thd.all_gather_object(reports, checks)
thd.destroy_process_group()

if rank == 0:
    print(f"thd process groups (Python): {world} ranks; rank 0's values\n")
    all_ok = True
    for what, got, expected in reports[0]:
        ok = np.allclose(got, expected)
        all_ok = all_ok and ok
        print(f"  {what:<32} = {got} (expected {expected}){'' if ok else '  <-- WRONG'}")
    for r, rank_checks in enumerate(reports[1:], start=1):
        wrong = [what for what, got, expected in rank_checks if not np.allclose(got, expected)]
        all_ok = all_ok and not wrong
        print(f"  rank {r}: {len(rank_checks) - len(wrong)} of {len(rank_checks)} values as expected"
              + (f"  <-- WRONG: {', '.join(wrong)}" if wrong else ""))
    print("\nall values as expected" if all_ok else "\nSOME VALUES ARE WRONG")
    sys.exit(0 if all_ok else 1)
sys.exit(0 if all(np.allclose(got, exp) for _, got, exp in checks) else 1)
