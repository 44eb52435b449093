# The master layer's sources, relative to the repository root.
set(THD_MASTER_SOURCES
  master/collectives.cpp
  master/distributed_tensor.cpp
  master/distributed_tensor_ops.cpp
  master/emit.cpp
  master/infer.cpp
  master/backend_choice.cpp
  master/init.cpp
  master/node_link.cpp
  master/pool_attach.cpp
  master/scopes.cpp
  master/session.cpp
  master/spmd_launch.cpp
  master/stats.cpp
  master/trace.cpp
  master/streams_api.cpp
)
