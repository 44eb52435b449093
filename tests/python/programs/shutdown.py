"""shutdown(): ends the session once, the workers exit, later calls say so."""

import thd

thd.init_master_worker(timeout=60)
x = thd.ones(3)
x += 1
thd.shutdown()
assert not thd.is_master()
thd.shutdown()  # a second call does nothing
try:
    thd.zeros(2)
except thd.ValueError as e:
    assert "not initialized" in str(e), str(e)
else:
    raise AssertionError("an op after shutdown did not raise")
try:
    thd.num_nodes()
except thd.ValueError:
    pass
else:
    raise AssertionError("num_nodes after shutdown did not raise")
print("PASS shutdown.py")
