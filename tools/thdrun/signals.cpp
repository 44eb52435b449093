#include "tools/thdrun/signals.h"

#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <system_error>

#include "tensor/check.h"

namespace thd::launch {
namespace {

// The pipe the handler writes to. A signal handler can reach nothing else: this is
// the one piece of global state, owned by the live SignalEvents.
std::atomic<int> g_signal_pipe{-1};

extern "C" void on_signal(int sig) {
  const int saved_errno = errno;
  const int fd = g_signal_pipe.load(std::memory_order_relaxed);
  if (fd >= 0) {
    // A full pipe drops the byte: thousands of signals are already waiting, and
    // the loop reaps every child on any wake-up anyway.
    const unsigned char byte = static_cast<unsigned char>(sig);
    ssize_t ignored = ::write(fd, &byte, 1);
    (void)ignored;
  }
  errno = saved_errno;
}

}  // namespace

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

SignalEvents::SignalEvents() {
  int fds[2];
  THD_CHECK(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0, Error, "thdrun", "cannot create the signal pipe: {}",
            std::system_category().message(errno));
  read_end_.reset(fds[0]);
  write_end_.reset(fds[1]);
  int expected = -1;
  THD_CHECK(g_signal_pipe.compare_exchange_strong(expected, fds[1]), Error, "thdrun",
            "only one SignalEvents may exist at a time");

  auto install = [this](int sig, void (*handler)(int), int flags) {
    Saved& s = saved_[saved_count_++];
    s.sig = sig;
    struct sigaction act {};
    act.sa_handler = handler;
    act.sa_flags = flags;
    sigemptyset(&act.sa_mask);
    ::sigaction(sig, &act, &s.action);
  };
  for (int sig : kForwardedSignals) {
    struct sigaction now {};
    ::sigaction(sig, nullptr, &now);
    if (now.sa_handler != SIG_IGN) install(sig, on_signal, SA_RESTART);
  }
  // SIGCHLD even when it was ignored: ignoring it makes the kernel reap the ranks
  // and lose their statuses.
  install(SIGCHLD, on_signal, SA_RESTART | SA_NOCLDSTOP);
  // A write to a closed stdout (thdrun | head) must fail with EPIPE, not kill the
  // launcher while ranks still run.
  install(SIGPIPE, SIG_IGN, 0);

  // This thread must be able to take them (a parent may have left them blocked).
  sigset_t ours;
  sigemptyset(&ours);
  for (int sig : kForwardedSignals) sigaddset(&ours, sig);
  sigaddset(&ours, SIGCHLD);
  ::pthread_sigmask(SIG_UNBLOCK, &ours, &original_mask_);
}

SignalEvents::~SignalEvents() {
  restore_actions();
  ::pthread_sigmask(SIG_SETMASK, &original_mask_, nullptr);
  g_signal_pipe.store(-1);
}

void SignalEvents::restore_actions() const noexcept {
  for (size_t i = 0; i < saved_count_; ++i) ::sigaction(saved_[i].sig, &saved_[i].action, nullptr);
}

void SignalEvents::restore_in_child() const noexcept {
  restore_actions();
  ::sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
}

std::optional<int> SignalEvents::next() {
  unsigned char byte = 0;
  for (;;) {
    ssize_t n = ::read(read_end_.get(), &byte, 1);
    if (n == 1) return static_cast<int>(byte);
    if (n < 0 && errno == EINTR) continue;
    return std::nullopt;  // EAGAIN: nothing pending
  }
}

}  // namespace thd::launch
