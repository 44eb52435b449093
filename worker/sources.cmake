# The worker layer's sources, relative to the repository root.
set(THD_WORKER_SOURCES
  worker/collective_path.cpp
  worker/devices.cpp
  worker/dispatch.cpp
  worker/events.cpp
  worker/exec_context.cpp
  worker/gpu_streams.cpp
  worker/graphs.cpp
  worker/handle_table.cpp
  worker/ops_create.cpp
  worker/ops_graph.cpp
  worker/ops_math.cpp
  worker/ops_shape.cpp
  worker/ops_stream.cpp
  worker/notice_board.cpp
  worker/ops_transfer.cpp
  worker/pool.cpp
  worker/progress_reporter.cpp
  worker/session.cpp
  worker/sizes.cpp
  worker/stream_check.cpp
  worker/streams.cpp
  worker/worker.cpp
)
if(THD_ENABLE_TEST_HOOKS)
  list(APPEND THD_WORKER_SOURCES worker/ops_test_hooks.cpp)
endif()
