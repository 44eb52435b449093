// Where the pipe's waiter blocks: poll() on the completion queue's file descriptor
// (when the provider has one) and on an eventfd that interrupt() writes, with the
// caller's deadline and, for providers without a wait object, a short nap.
#pragma once

#include <chrono>

#include "datachannel/net/fd.h"
#include "datachannel/net/socket.h"

namespace thd::detail::libfabric {

class Sleeper {
 public:
  // ConnectionError when no eventfd can be made.
  Sleeper();

  // Ends the current sleep() now, or makes the next one return at once. Any
  // thread, any time.
  void interrupt() noexcept;

  // Blocks until `wait_fd` (if >= 0) is readable, interrupt() was called, `until`
  // passes, or `nap` (if > 0) has gone by. Consumes the interrupt.
  void sleep(int wait_fd, net::Deadline until, std::chrono::microseconds nap) noexcept;

 private:
  net::UniqueFd event_;
};

}  // namespace thd::detail::libfabric
