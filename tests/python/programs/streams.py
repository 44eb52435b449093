"""Streams and events from Python (thdrun -n 3: nodes 0 and 1): issue order on a
stream, a cross-node wait, timing, queries, and the errors of misuse."""

import datetime

import numpy as np

import thd

# The knobs of MasterWorkerOptions: a small op window (the loops below run under
# flow control) and at most 4 streams a node.
thd.init_master_worker(timeout=datetime.timedelta(seconds=60), max_ops_in_flight=8, batch_bytes=1024,
                       flush_after=datetime.timedelta(microseconds=100), max_streams_per_node=4)

s = thd.Stream(node=1)
assert s.node == 1 and not s.is_default and s.priority == 0 and s.id > 0
assert thd.default_stream(1).is_default and thd.current_stream() == thd.default_stream(0)
assert thd.Stream(node=0, priority=-1).priority == -1

# Ops on one stream run in issue order; the scope's node is the stream's.
with thd.stream(s):
    assert thd.current_node() == 1 and thd.current_stream() == s
    x = thd.zeros(8, dtype=thd.int64)
    for i in range(100):
        x.add_(i)
s.synchronize()
assert s.query()
assert x.node == 1 and x.numpy().tolist() == [4950] * 8

# A stream of node 0 waits for an event recorded on node 1's stream.
producer = thd.Stream(node=1)
consumer = thd.Stream(node=0)
with thd.stream(producer):
    y = thd.full((4,), 3.0)
    y *= 2.0
done = producer.record_event()
assert done.node == 1
consumer.wait_event(done)
with thd.stream(consumer):
    z = y.to_node(0) + 1.0
consumer.synchronize()
np.testing.assert_allclose(z.numpy(), np.full(4, 7.0))

# wait_stream, and an Event recorded explicitly.
later = thd.Stream(node=1)
later.wait_stream(producer)
e = thd.Event()
e.record(later)
e.synchronize()
assert e.query()

# Timing between two events of one node.
start, end = thd.Event(enable_timing=True), thd.Event(enable_timing=True)
with thd.stream(s):
    start.record()
    m = thd.randn(200, 200)
    for _ in range(5):
        m = m @ m * 0.01
    end.record()
end.synchronize()
ms = start.elapsed_time(end)
assert ms >= 0.0, ms

# Misuse raises at the call site.
try:
    thd.Stream(priority=1)
    raise AssertionError("priority 1 was accepted")
except thd.ValueError as err:
    assert "priority" in str(err)
try:
    done.record(thd.Stream(node=0))
    raise AssertionError("an event of node 1 was recorded on node 0")
except thd.ValueError as err:
    assert err.op, err
try:
    start.elapsed_time(thd.Event())
    raise AssertionError("elapsed_time to an event without timing")
except thd.ValueError:
    pass

# Node 1 holds s, producer and later: one more fits, the fifth is refused.
extra = thd.Stream(node=1)
try:
    thd.Stream(node=1)
    raise AssertionError("a fifth stream of node 1 was created with max_streams_per_node=4")
except thd.ValueError as err:
    assert "max_streams_per_node" in str(err), err
del extra
thd.Stream(node=1)  # a dropped stream made room

try:
    thd.init_master_worker(flush_after=-1.0)
    raise AssertionError("a second init_master_worker was accepted")
except thd.ValueError:
    pass

thd.shutdown()
print("PASS streams.py")
