// The server half of TCPStore: one thread running an epoll loop over every client.
//
// Threading: the loop thread alone owns the key-value map and every connection;
// other threads talk to it only through stop() (an eventfd) and the join counter
// (a mutex and condition variable). Nothing in the loop blocks: sockets are
// nonblocking, each connection keeps its own input and output buffers, and a get or
// wait whose keys are missing is parked (filed under one missing key, with a
// deadline in a timer set) instead of being waited for.
//
// Per connection, in order:
//   1. the auth handshake (datachannel/net/auth.h) as a state machine in the loop:
//      the ServerHello goes out on accept, exactly kClientHelloBytes are read, the
//      verdict is sent. A connection that does not finish within the handshake
//      timeout, fails the proof, or sends garbage is logged (THD_LOG_WARN, with the
//      peer address) and closed; other clients are served meanwhile. Connections
//      in this step are capped per source address and in all
//      (net::HandshakeAdmission): under a flood the oldest is closed to make room,
//      so silent connections never use up the descriptors the store needs.
//   2. requests (datachannel/store/tcp_store_wire.h), answered in order, one at a
//      time: while a request is parked or its reply is still being sent, the
//      connection's further input is not read, which bounds what one client can
//      make the server buffer to about one message each way. A frame that is
//      oversized, empty or does not decode drops that connection only.
//
// The loop never throws out of its thread: per-connection problems close that
// connection, and an unexpected internal error is logged and ends the loop, which
// closes every connection so clients fail fast (PeerLost) instead of hanging.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "datachannel/net/auth.h"

namespace thd::detail {

class TCPStoreServer {
 public:
  // Binds host:port (port 0: ephemeral) and starts serving. Throws ConnectionError
  // when the address cannot be bound.
  TCPStoreServer(const std::string& host, uint16_t port, net::AuthToken token,
                 std::chrono::milliseconds handshake_timeout);
  // Stops the loop, closes every connection and joins the thread.
  ~TCPStoreServer();

  TCPStoreServer(const TCPStoreServer&) = delete;
  TCPStoreServer& operator=(const TCPStoreServer&) = delete;

  uint16_t port() const noexcept { return port_; }
  const std::string& endpoint() const noexcept { return endpoint_; }

  // Blocks until `count` authenticated clients have sent Join, or the deadline.
  // Returns how many had joined.
  int wait_for_joined(int count, net::Deadline deadline);

  struct JoinCounter {
    std::mutex mu;
    std::condition_variable changed;
    int joined = 0;
  };
  class Loop;

 private:
  JoinCounter joined_;
  std::unique_ptr<Loop> loop_;
  uint16_t port_ = 0;
  std::string endpoint_;
  std::thread thread_;
};

}  // namespace thd::detail
