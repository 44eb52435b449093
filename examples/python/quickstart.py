"""thd's quickstart from Python: THD's announced example, as close to it as the names
allow. A master drives tensors that live on worker processes.

    thdrun -n 4 python3 examples/python/quickstart.py   # the master + 3 worker nodes

(with PYTHONPATH=build/python in a build tree). Rank 0 returns from
init_master_worker as the master; the other ranks serve and exit when it shuts
down. Every line prints a value computed on the workers next to the value
expected; the program exits 1 if any differ.
"""

import sys

import numpy as np

import thd

all_ok = True


def report(what, got, expected):
    global all_ok
    ok = abs(got - expected) <= 1e-4 * (1.0 + abs(expected))
    all_ok = all_ok and ok
    print(f"  {what:<44} = {got:g} (expected {expected:g}){'' if ok else '  <-- WRONG'}")


thd.init_master_worker(backend=None)  # $THD_BACKEND (thdrun --backend), else tcp
nodes = thd.num_nodes()
print(f"thd quickstart (Python): a master and {nodes} worker nodes\n")

# THD: x = torch.distributed.FloatTensor(20, 20).fill_(4)
x = thd.FloatTensor(20, 20).fill_(4)
# THD: y = torch.randn(20, 20).dist_send(); here a known local tensor, uploaded.
local_y = thd.tensor(np.arange(400, dtype=np.float32).reshape(20, 20))
y = local_y.dist_send()
z = x + y * 2  # async: returns at once
report("z = x + 2y on node 0; z.sum()", z.sum().item(), 4 * 400 + 2 * (399 * 400 / 2))

# THD: with torch.distributed.node(1): ...
if nodes > 1:
    with thd.node(1):
        a = thd.ones(10) * 3
        report("a = ones(10) * 3 on node 1; a.sum()", a.sum().item(), 30)
        report("a.node", a.node, 1)
        z1 = z.to_node(1)  # a worker-to-worker copy
        report("z.to_node(1).mean()", z1.mean().item(), (4 * 400 + 2 * (399 * 400 / 2)) / 400.0)

# One tensor per node, all-reduced among the workers themselves.
grads = []
for n in range(nodes):
    with thd.node(n):
        grads.append(thd.full((1000,), float(n + 1)))
thd.all_reduce(grads, op=thd.ReduceOp.SUM)
for n in range(nodes):
    report(f"all_reduce result on node {n}, element 7", grads[n][7].item(), nodes * (nodes + 1) / 2.0)

local = z.get().numpy()  # a sync point: z's bytes come back
report("z.get()[3][4]", float(local[3][4]), 4 + 2 * (3 * 20 + 4))

thd.shutdown()
print("\n" + ("all results as expected" if all_ok else "SOME RESULTS ARE WRONG"))
sys.exit(0 if all_ok else 1)
