"""Graphs from Python: `with thd.graph() as g:` captures without running, g.replay()
runs the captured ops again, sync points inside a capture raise, and an exception
out of the block discards the capture (thdrun -n 3: the master and two nodes)."""

from conftest import check_job


def test_capture_and_replay_with_the_graph_context_manager():
    check_job("graphs.py")
