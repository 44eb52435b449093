// The accepting half of the tcp backend's connection set-up: one epoll loop that
// serves every incoming connection at once, so a client that is slow, silent or
// hostile delays nobody else.
//
// Per connection, as a nonblocking state machine with a handshake deadline:
//   1. the auth handshake (net::ServerHandshake): ServerHello out, exactly
//      kClientHelloBytes in, the verdict out;
//   2. the identity Hello in (exactly kHelloBytes), checked: this channel's id,
//      this world's size, a rank above this one not connected yet;
//   3. this rank's Hello out; then the socket belongs to the mesh.
// A connection that fails any step, or does not finish within the handshake
// timeout, is logged (THD_LOG_WARN, with its address and why) and closed, and
// serving goes on. Connections still in step 1 are capped per source address and
// in all (net::HandshakeAdmission): under a flood the oldest is closed to make
// room, so silent connections never use up the descriptors a rank needs. Nothing beyond those fixed-size messages is read, so frames a
// peer sends right after its Hello stay in the socket for the transport.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "datachannel/net/auth.h"
#include "datachannel/net/fd.h"
#include "datachannel/net/handshake_admission.h"
#include "datachannel/net/socket.h"
#include "datachannel/wire.h"

namespace thd::detail::tcp {

class MeshAcceptor {
 public:
  // `self`: this rank's Hello (its rank, the world size, the channel id); every
  // rank above self.rank is expected. `token` must outlive this object.
  MeshAcceptor(net::Socket listener, const net::AuthToken& token, Hello self,
               std::chrono::milliseconds handshake_timeout);
  ~MeshAcceptor();
  MeshAcceptor(const MeshAcceptor&) = delete;
  MeshAcceptor& operator=(const MeshAcceptor&) = delete;

  // Serves until every expected rank is connected, stop() is called, or `deadline`
  // passes. Never throws: an internal failure (epoll) is kept for error().
  void run(net::Deadline deadline) noexcept;
  // Any thread: makes run() return soon.
  void stop() noexcept;

  // After run(): the connected ranks' sockets by world rank (invalid where a rank
  // did not connect), the internal failure if any.
  std::vector<net::Socket> take_connected() { return std::move(connected_); }
  std::exception_ptr error() const { return error_; }

 private:
  struct Incoming;
  void serve(net::Deadline deadline);
  void accept_all();
  // Advances one connection; false once it is closed or handed to the mesh.
  bool advance(Incoming& c);
  void refuse(Incoming& c, const std::string& why);
  // Closes a pending connection that the admission limits evicted.
  void shed(uint64_t id);
  void close(uint64_t id);
  bool complete() const;

  net::Socket listener_;
  const net::AuthToken& token_;
  Hello self_;
  std::chrono::milliseconds handshake_timeout_;
  net::UniqueFd epoll_;
  net::UniqueFd wake_;
  std::atomic<bool> stopping_{false};
  std::vector<std::unique_ptr<Incoming>> incoming_;  // at most the admission limit awaiting the handshake
  net::HandshakeAdmission admission_;
  uint64_t next_id_ = 2;                              // 0, 1: listener, wake-up
  std::vector<net::Socket> connected_;
  std::exception_ptr error_;
};

}  // namespace thd::detail::tcp
