"""Data-parallel training from Python: a softmax classifier (logistic regression)
for the handwritten digits that scikit-learn ships (load_digits: 1,797 8x8 images,
no download), with its gradients written by hand, trained over every worker node.

    thdrun -n 4 python3 examples/python/data_parallel_digits.py   # the master + 3 nodes

Each node holds a shard of the training set and its own copy of the weights. Every
step, each node computes the gradient of the mean cross-entropy on its shard's
mini-batch; thd.all_reduce sums the nodes' gradients among the workers (no byte
passes the master); every node applies the same update, so the copies stay equal.
The master only issues ops and reads the accuracy once an epoch. It prints the test
accuracy per epoch and exits 1 if the last one is under 90 %.
"""

import sys

import numpy as np
from sklearn.datasets import load_digits

import thd

EPOCHS = 12
BATCH = 32  # per node and step
LEARNING_RATE = 0.5
CLASSES = 10

thd.init_master_worker()
nodes = thd.num_nodes()

digits = load_digits()
features = (digits.data / 16.0).astype(np.float32)  # pixels in [0, 1]
labels = digits.target.astype(np.int64)
order = np.random.default_rng(0).permutation(len(labels))
test_idx, train_idx = order[:360], order[360:]
one_hot = np.eye(CLASSES, dtype=np.float32)[labels]

# The shards, equal in size so every node takes the same number of steps.
per_node = len(train_idx) // nodes
steps = per_node // BATCH
xs, ys, weights, biases = [], [], [], []
for n in range(nodes):
    rows = train_idx[n * per_node:(n + 1) * per_node]
    with thd.node(n):
        xs.append(thd.tensor(features[rows]).dist_send())
        ys.append(thd.tensor(one_hot[rows]).dist_send())
        weights.append(thd.zeros(features.shape[1], CLASSES))
        biases.append(thd.zeros(CLASSES))
# The test set on node 0, where the accuracy is measured.
x_test = thd.tensor(features[test_idx]).dist_send(0)
y_test = thd.tensor(labels[test_idx]).dist_send(0)
scale = 1.0 / (BATCH * nodes)  # the gradient of the mean over the global batch

print(f"digits: {len(train_idx)} training images over {nodes} nodes ({per_node} each), {len(test_idx)} to test")
accuracy = 0.0
for epoch in range(1, EPOCHS + 1):
    for step in range(steps):
        rows = slice(step * BATCH, (step + 1) * BATCH)
        grad_w, grad_b = [], []
        for n in range(nodes):
            x, y = xs[n][rows], ys[n][rows]
            probs = (x.mm(weights[n]) + biases[n]).softmax(dim=1)
            error = probs - y  # d(cross-entropy)/d(logits)
            grad_w.append(x.t().mm(error) * scale)
            grad_b.append(error.sum(dim=0) * scale)
        thd.all_reduce(grad_w)
        thd.all_reduce(grad_b)
        for n in range(nodes):
            weights[n].sub_(grad_w[n] * LEARNING_RATE)
            biases[n].sub_(grad_b[n] * LEARNING_RATE)
    predicted = (x_test.mm(weights[0]) + biases[0]).argmax(dim=1)
    accuracy = (predicted == y_test).to(thd.float32).mean().item()
    print(f"epoch {epoch:2d}: test accuracy {100 * accuracy:.1f} %")

# The nodes' copies of the weights stayed equal.
spread = max((weights[n].to_node(0) - weights[0]).abs().max().item() for n in range(nodes))
print(f"largest difference between the nodes' weights: {spread:g}")
thd.shutdown()
ok = accuracy >= 0.90 and spread <= 1e-5
print("reached 90 % test accuracy" if ok else "DID NOT REACH 90 % (or the copies diverged)")
sys.exit(0 if ok else 1)
