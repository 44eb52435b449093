"""Python threads issuing ops at once (thdrun -n 3): each thread works on its own
node scope and tensors, the calls release the GIL, and every result is right."""

import datetime
import threading

import numpy as np

import thd

thd.init_master_worker(timeout=datetime.timedelta(seconds=60))
errors = []


def work(index):
    try:
        node = index % thd.num_nodes()
        with thd.node(node):  # per thread, as C++'s NodeScope
            x = thd.zeros(64, dtype=thd.int64)
            for i in range(300):
                x.add_(i + index)
            y = (x * 2).to_node((node + 1) % thd.num_nodes())
            expected = 2 * (300 * 299 // 2 + 300 * index)
            got = y.numpy()
            assert y.node == (node + 1) % thd.num_nodes()
            assert (got == expected).all(), (index, got[:4], expected)
            assert thd.current_node() == node
    except Exception as e:  # reported by the main thread
        errors.append(f"thread {index}: {e!r}")


threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join(timeout=120)
assert not any(t.is_alive() for t in threads), "a thread did not finish"
assert not errors, errors
assert thd.current_node() == 0  # the other threads' scopes did not leak here
np.testing.assert_array_equal(thd.ones(3).numpy(), np.ones(3))

thd.shutdown()
print("PASS threads.py")
