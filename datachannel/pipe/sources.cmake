# The software-matching transport over a MessagePipe (mpi, ucx, libfabric), relative to datachannel/.
set(THD_DC_PIPE_SOURCES
  pipe/address_book.cpp
  pipe/direct_recv.cpp
  pipe/engine_lock.cpp
  pipe/liveness.cpp
  pipe/lost_peers.cpp
  pipe/pipe_engine.cpp
  pipe/pipe_transport.cpp
  pipe/pipe_transport_direct.cpp
  pipe/pipe_tuning.cpp
  pipe/process_watch.cpp
  pipe/token_proof.cpp
  pipe/yield_backoff.cpp
)
