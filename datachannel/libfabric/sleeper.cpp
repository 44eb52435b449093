#include "datachannel/libfabric/sleeper.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "datachannel/check.h"
#include "datachannel/libfabric/fi_error.h"

namespace thd::detail::libfabric {

Sleeper::Sleeper() : event_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!event_) THD_THROW(ConnectionError, kOp, "eventfd for the pipe's wake-ups failed: {}", std::strerror(errno));
}

void Sleeper::interrupt() noexcept {
  const uint64_t one = 1;
  // EAGAIN means the counter is already full: a wake-up is pending either way.
  [[maybe_unused]] ssize_t n = ::write(event_.get(), &one, sizeof one);
}

void Sleeper::sleep(int wait_fd, net::Deadline until, std::chrono::microseconds nap) noexcept {
  pollfd fds[2] = {{event_.get(), POLLIN, 0}, {wait_fd, POLLIN, 0}};
  const nfds_t count = wait_fd >= 0 ? 2 : 1;

  // ppoll, for naps below a millisecond. A deadline at Clock's maximum is "never".
  timespec limit{};
  timespec* timeout = nullptr;
  const auto now = net::Clock::now();
  if (until != net::Deadline::max() || nap.count() > 0) {
    auto left = until <= now ? net::Clock::duration::zero() : until - now;
    if (nap.count() > 0 && nap < left) left = nap;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    limit.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    limit.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    timeout = &limit;
  }
  // EINTR (a signal) simply ends this sleep early; the caller loops.
  if (::ppoll(fds, count, timeout, nullptr) > 0 && (fds[0].revents & POLLIN) != 0) {
    uint64_t drained;
    [[maybe_unused]] ssize_t n = ::read(event_.get(), &drained, sizeof drained);
  }
}

}  // namespace thd::detail::libfabric
