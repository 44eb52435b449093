#include "datachannel/tcp/mesh.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <thread>

#include <fmt/ranges.h>

#include "datachannel/check.h"
#include "datachannel/tcp/mesh_acceptor.h"
#include "tensor/log.h"

namespace thd::detail::tcp {

using net::Clock;
using net::Deadline;
using std::chrono::milliseconds;

namespace {

constexpr const char* kOp = "tcp backend set-up";

std::string addr_key(int rank) { return fmt::format("addr/{}", rank); }

milliseconds left_until(Deadline deadline) {
  const auto now = Clock::now();
  if (now >= deadline) return milliseconds{1};  // the store's get needs a positive timeout
  return std::max(milliseconds{1}, std::chrono::ceil<milliseconds>(deadline - now));
}

// Agreed through the store: the first rank to arrive proposes, everyone reads back
// what won.
ChannelId agree_channel_id(Store& store, int rank) {
  const net::Nonce random = net::random_nonce();
  const std::vector<uint8_t> proposal(random.begin(), random.begin() + kChannelIdBytes);
  const std::vector<uint8_t> agreed = store.compare_set("channel_id", std::vector<uint8_t>{}, proposal);
  THD_CHECK(agreed.size() == kChannelIdBytes, ConnectionError, kOp,
            "rank {}: the store's 'channel_id' holds {} bytes, not a tcp backend channel id ({} bytes): "
            "is the store namespace shared with something else?",
            rank, agreed.size(), kChannelIdBytes);
  ChannelId id;
  std::copy(agreed.begin(), agreed.end(), id.begin());
  return id;
}

// The acceptor runs on its own thread while this one connects; stopped and joined
// on every way out.
class AcceptorThread {
 public:
  AcceptorThread(std::unique_ptr<MeshAcceptor> acceptor, Deadline deadline)
      : acceptor_(std::move(acceptor)), thread_([this, deadline] { acceptor_->run(deadline); }) {}
  ~AcceptorThread() {
    if (thread_.joinable()) {
      acceptor_->stop();
      thread_.join();
    }
  }
  AcceptorThread(const AcceptorThread&) = delete;
  AcceptorThread& operator=(const AcceptorThread&) = delete;

  // Waits for the acceptor to finish on its own (all connected, or the deadline).
  MeshAcceptor& join() {
    thread_.join();
    return *acceptor_;
  }

 private:
  std::unique_ptr<MeshAcceptor> acceptor_;
  std::thread thread_;
};

// Connects to a lower rank: TCP, the auth handshake, then the Hellos both ways.
// Returns an invalid socket when the deadline passed first (the rank is missing).
net::Socket connect_to(const MeshOptions& o, const Hello& self, int peer) {
  std::string endpoint;
  try {
    const std::vector<uint8_t> value = o.store->get(addr_key(peer), left_until(o.deadline));
    endpoint.assign(value.begin(), value.end());
  } catch (const TimeoutError&) {
    return {};  // never published its address
  }
  std::string host;
  uint16_t port = 0;
  THD_CHECK(parse_endpoint(endpoint, &host, &port), ConnectionError, kOp,
            "rank {}: rank {} published the address '{}', which is not host:port", o.rank, peer, endpoint);
  try {
    net::Socket s = net::connect_authenticated(host, port, *o.token, o.deadline, kOp);
    const HelloBytes mine = encode_hello(self);
    s.send_all(mine, o.deadline, kOp);
    HelloBytes reply{};
    s.recv_exact(reply, o.deadline, kOp);
    Hello theirs;
    std::string why;
    THD_CHECK(decode_hello(reply, &theirs, &why), ConnectionError, kOp,
              "rank {}: {} (published by rank {}) answered with something else: {}", o.rank, endpoint, peer, why);
    THD_CHECK(theirs.channel == self.channel && theirs.rank == peer && theirs.world_size == self.world_size,
              ConnectionError, kOp,
              "rank {}: {} (published by rank {}) is rank {} of a world of {} of {} channel, not rank {} of "
              "this one",
              o.rank, endpoint, peer, theirs.rank, theirs.world_size,
              theirs.channel == self.channel ? "this" : "another", peer);
    return s;
  } catch (const TimeoutError&) {
    return {};
  } catch (const AuthError&) {
    throw;  // says what is wrong with the token already
  } catch (const ConnectionError& e) {
    // PeerLost included: the peer hung up on this rank's Hello (it refused it; its
    // log, at THD_LOG_LEVEL=warn, says why).
    THD_THROW_AT(ConnectionError, kOp, o.rank, peer, "rank {} could not connect to rank {} at {}: {}", o.rank,
                 peer, endpoint, e.message());
  }
}

}  // namespace

std::string published_host(const std::string& bind_host) {
  if (!bind_host.empty() && bind_host != "0.0.0.0" && bind_host != "::" && bind_host != "[::]") return bind_host;
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "127.0.0.1";
  return name;
}

bool parse_endpoint(const std::string& endpoint, std::string* host, uint16_t* port) {
  std::string_view rest;
  if (!endpoint.empty() && endpoint.front() == '[') {
    const size_t close = endpoint.find(']');
    if (close == std::string::npos || close + 1 >= endpoint.size() || endpoint[close + 1] != ':') return false;
    *host = endpoint.substr(1, close - 1);
    rest = std::string_view(endpoint).substr(close + 2);
  } else {
    const size_t colon = endpoint.rfind(':');
    if (colon == std::string::npos || colon == 0) return false;
    *host = endpoint.substr(0, colon);
    rest = std::string_view(endpoint).substr(colon + 1);
  }
  if (host->empty() || rest.empty() || rest.size() > 5) return false;
  unsigned value = 0;
  for (char ch : rest) {
    if (ch < '0' || ch > '9') return false;
    value = value * 10 + static_cast<unsigned>(ch - '0');
  }
  if (value == 0 || value > 65535) return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

Mesh connect_mesh(const MeshOptions& o) {
  const auto start = Clock::now();
  Mesh mesh;
  mesh.peers.resize(static_cast<size_t>(o.world_size));
  mesh.channel = agree_channel_id(*o.store, o.rank);
  if (o.world_size == 1) return mesh;
  const Hello self{o.rank, o.world_size, mesh.channel};

  // Only ranks with ranks above them listen; the top rank only connects.
  std::optional<AcceptorThread> acceptor;
  if (o.rank < o.world_size - 1) {
    net::Socket listener = net::Socket::listen(o.bind_host, 0, kOp);
    const std::string endpoint = net::format_endpoint(published_host(o.bind_host), listener.local_port());
    acceptor.emplace(std::make_unique<MeshAcceptor>(std::move(listener), *o.token, self, o.handshake_timeout),
                     o.deadline);
    o.store->set(addr_key(o.rank), endpoint);
  }

  std::vector<int> missing;
  for (int peer = 0; peer < o.rank; ++peer) {
    net::Socket s = connect_to(o, self, peer);
    if (!s.valid()) missing.push_back(peer);
    mesh.peers[static_cast<size_t>(peer)] = std::move(s);
  }
  if (acceptor) {
    MeshAcceptor& done = acceptor->join();
    if (done.error()) std::rethrow_exception(done.error());
    std::vector<net::Socket> accepted = done.take_connected();
    for (int peer = o.rank + 1; peer < o.world_size; ++peer) {
      net::Socket& s = accepted[static_cast<size_t>(peer)];
      if (!s.valid()) missing.push_back(peer);
      mesh.peers[static_cast<size_t>(peer)] = std::move(s);
    }
  }
  if (!missing.empty()) {
    const auto waited = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
    THD_THROW_AT(TimeoutError, kOp, o.rank, missing.size() == 1 ? missing.front() : -1,
                 "rank {} could not connect to rank{} {} within {} ms: {} not running, or using another store, "
                 "token or address? (refused connections are logged at THD_LOG_LEVEL=warn)",
                 o.rank, missing.size() == 1 ? "" : "s", fmt::join(missing, ", "), waited,
                 missing.size() == 1 ? "is it" : "are they");
  }
  THD_LOG_DEBUG("{}: rank {} connected to all {} peers", kOp, o.rank, o.world_size - 1);
  return mesh;
}

}  // namespace thd::detail::tcp
