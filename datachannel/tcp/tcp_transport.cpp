#include "datachannel/tcp/tcp_transport.h"

#include "datachannel/check.h"
#include "datachannel/transport_options.h"
#include "datachannel/tcp/mesh.h"
#include "datachannel/tcp/tcp_transport_impl.h"

namespace thd::detail::tcp {

namespace {
constexpr const char* kOp = "tcp backend";
}  // namespace

std::shared_ptr<Transport> make_transport(const DataChannelOptions& options) {
  return make_transport(options, tuning_for(options));
}

std::shared_ptr<Transport> make_transport(const DataChannelOptions& options, const Tuning& tuning) {
  check_transport_options(options, kOp, "the ranks exchange their addresses through it");
  const net::AuthToken token = net::resolve_auth_token(options.token, kOp);
  MeshOptions mesh_options;
  mesh_options.rank = options.rank;
  mesh_options.world_size = options.world_size;
  mesh_options.store = options.store;
  mesh_options.token = &token;
  mesh_options.bind_host = options.bind_host;
  mesh_options.deadline = net::deadline_after(options.timeout);
  mesh_options.handshake_timeout = tuning.handshake_timeout;
  Mesh mesh = connect_mesh(mesh_options);
  return std::make_shared<TcpTransport>(options.rank, options.world_size, std::move(mesh), tuning);
}

}  // namespace thd::detail::tcp
