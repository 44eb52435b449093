// The reference for the tcp DataChannel's point-to-point figures: one plain TCP
// connection over loopback between two ranks, driven as a hand-written transport
// would drive it (nonblocking, TCP_NODELAY, send()/recv() busy-polled, no framing,
// no threads), so a ratio compares the channel with the raw kernel path.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>

#include <thd/store.h>

#include "bench/datachannel/process.h"

namespace thd::bench::dc {

class RawTcpConnection {
 public:
  // One side listens on an ephemeral loopback port and publishes it, with a random
  // nonce, under `key` in the job's (authenticated) store; the other side reads them,
  // connects and sends the nonce, which the listener checks before it accepts the
  // connection as its peer's. Throws std::runtime_error (or the store's
  // TimeoutError) when no peer shows up within `timeout`.
  static RawTcpConnection listen(Store& store, const std::string& key, std::chrono::milliseconds timeout);
  static RawTcpConnection connect(Store& store, const std::string& key, std::chrono::milliseconds timeout);

  // Return once every byte is in the kernel / has arrived; busy-poll meanwhile.
  // Throw std::runtime_error when the peer closes the connection or `timeout` (from
  // the call) passes.
  void send_all(std::span<const uint8_t> data);
  void recv_all(std::span<uint8_t> data);

 private:
  RawTcpConnection(Fd fd, std::chrono::milliseconds timeout) : fd_(std::move(fd)), timeout_(timeout) {}

  Fd fd_;
  std::chrono::milliseconds timeout_;
};

}  // namespace thd::bench::dc
