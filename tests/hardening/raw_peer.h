// Peers that misbehave on the wire, for the security and fault tests: raw loopback
// connections, a proxy that records what a real client sends (to replay it), a
// store view that sends one rank's connections through such a proxy, and a fake
// tcp DataChannel rank that joins a real mesh and then breaks off mid-frame.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <thd/store.h>

#include "datachannel/net/socket.h"

namespace thd::test {

// A connection to 127.0.0.1:port.
net::Socket connect_raw(uint16_t port);
// Sends all of `bytes`; false if the peer has closed the connection meanwhile.
bool send_raw(net::Socket& s, const std::vector<uint8_t>& bytes);
// Exactly n bytes, or fewer when the peer closed the connection or `within` passed.
std::vector<uint8_t> recv_up_to(net::Socket& s, size_t n, std::chrono::milliseconds within);
// Closes `s` with a TCP reset rather than a FIN (SO_LINGER 0): what a peer whose
// host crashed, or a middlebox, leaves behind.
void reset_connection(net::Socket& s);

// A TCP proxy on loopback in front of 127.0.0.1:target_port: each connection it
// accepts is forwarded there, bytes pumped both ways, and what the client sent is
// recorded. Runs on a thread of its own until destroyed.
class RecordingProxy {
 public:
  explicit RecordingProxy(uint16_t target_port);
  ~RecordingProxy();
  RecordingProxy(const RecordingProxy&) = delete;
  RecordingProxy& operator=(const RecordingProxy&) = delete;

  uint16_t port() const { return port_; }
  size_t connections() const;
  // What the client of the k-th connection (in the order accepted) sent so far.
  std::vector<uint8_t> client_bytes(size_t k) const;

 private:
  struct Pair;
  void run();

  uint16_t target_port_;
  net::Socket listener_;
  uint16_t port_ = 0;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Pair>> pairs_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A view of `store` in which reads of one key ending in `key_suffix` answer
// `replacement` instead: the ranks that look up the address a tcp DataChannel rank
// published ("addr/<rank>") are sent elsewhere (a RecordingProxy).
std::shared_ptr<Store> redirect_key(std::shared_ptr<Store> store, std::string key_suffix, std::string replacement);

// The store key under which the tcp backend of the `instance`-th DataChannel
// created over a store keeps `key` ("addr/0", "channel_id").
std::string tcp_channel_key(int instance, const std::string& key);

// Plays the top rank (world_size - 1) of a tcp DataChannel whose other ranks are
// real, as far as the mesh goes: claims the rank's channel instance in `store`,
// connects to rank `peer`, proves `token` and exchanges the identity Hellos. The
// connection is then that rank's link to `peer`: what it sends next is framed
// traffic. Throws what the handshake throws.
net::Socket join_mesh_as_top_rank(Store& store, int world_size, int peer, const std::string& token);

}  // namespace thd::test
