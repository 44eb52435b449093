"""A master whose check fails (for the test of the test harness)."""

import thd

thd.init_master_worker(timeout=60)
assert thd.ones(1).item() == 2.0, "deliberately"
