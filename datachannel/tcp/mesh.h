// The tcp backend's connection set-up (docs/backend_tcp.md, "Mesh set-up"): one
// authenticated connection between every pair of ranks, made at init.
//
// Why a full mesh at init rather than connections on first use: the backend serves
// a handful of ranks, mostly on one host (N - 1 sockets each is cheap); a rank
// that is missing or misconfigured (wrong token, wrong address) fails the job at
// start with an error naming it, not at some later first message; and no message
// pays a connect and a handshake on its way. Once the mesh is made nothing
// listens: no port stays open for strangers.
//
// Who connects to whom: rank r connects to every rank below it and accepts every
// rank above it. Each rank publishes "addr/<rank>" (host:port) in the channel's
// store; the channel id (a random 16 bytes, agreed through "channel_id") goes into
// every identity Hello, so a connection from another job or another channel is
// refused even if it holds the token.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <thd/store.h>

#include "datachannel/net/auth.h"
#include "datachannel/net/socket.h"
#include "datachannel/wire.h"

namespace thd::detail::tcp {

struct MeshOptions {
  int rank = -1;
  int world_size = -1;
  std::shared_ptr<Store> store;     // the channel's own namespace
  const net::AuthToken* token = nullptr;
  std::string bind_host;            // where this rank listens
  net::Deadline deadline;           // for the whole set-up
  std::chrono::milliseconds handshake_timeout{5000};  // per incoming connection
};

struct Mesh {
  // By world rank; this rank's own entry is an invalid Socket.
  std::vector<net::Socket> peers;
  ChannelId channel{};
};

// Makes the mesh. TimeoutError naming the ranks that did not connect by the
// deadline; AuthError when a peer refuses this rank's token (or this rank has
// none); ConnectionError when the listening address cannot be bound or a peer at
// a published address is not the rank it should be.
Mesh connect_mesh(const MeshOptions& options);

// The address peers reach a listener at: the bind host, or for a wildcard bind
// ("0.0.0.0", "::", "") this host's name.
std::string published_host(const std::string& bind_host);

// "host:port" / "[v6]:port" back into its parts; false for anything else.
bool parse_endpoint(const std::string& endpoint, std::string* host, uint16_t* port);

}  // namespace thd::detail::tcp
