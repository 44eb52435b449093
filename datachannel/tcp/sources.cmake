# The tcp backend's sources, relative to datachannel/.
set(THD_DC_TCP_SOURCES
  tcp/mesh.cpp
  tcp/mesh_acceptor.cpp
  tcp/peer_io.cpp
  tcp/progress.cpp
  tcp/tcp_transport.cpp
  tcp/tcp_transport_impl.cpp
)
