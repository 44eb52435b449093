# The tcp backend's sources, relative to datachannel/.
set(THD_DC_TCP_SOURCES
  tcp/matching.cpp
  tcp/mesh.cpp
  tcp/mesh_acceptor.cpp
  tcp/peer_io.cpp
  tcp/progress.cpp
  tcp/spin_policy.cpp
  tcp/tcp_transport.cpp
  tcp/tcp_transport_impl.cpp
  tcp/wire.cpp
)
