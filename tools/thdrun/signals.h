// The launcher's signals as events. A handler for each forwarded signal and for
// SIGCHLD writes the signal's number into a pipe (the self-pipe trick), which the
// supervision loop polls with everything else; the handler does nothing else, so
// nothing async-signal-unsafe ever runs in one.
//
// Why not a signalfd: it needs the signals blocked in every thread, and a thread
// may exist before main() runs (OpenBLAS starts its pool from a library
// constructor, and libthd_tensor links it). A handler serves whichever thread the
// kernel picks.
#pragma once

#include <signal.h>

#include <array>
#include <optional>
#include <string>

#include "tools/thdrun/fd.h"

namespace thd::launch {

// What thdrun passes on to every rank.
inline constexpr std::array<int, 4> kForwardedSignals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// "SIGKILL"; "signal 77" for a number without a name.
std::string signal_name(int sig);

// One per process at a time (the handlers write to one pipe); thd::Error on a
// second. The destructor puts the dispositions back. A forwarded signal that was
// ignored when thdrun started (nohup, a background job of a shell without job
// control) stays ignored: thdrun never sees it and the ranks inherit the ignoring,
// as they would from a shell.
class SignalEvents {
 public:
  SignalEvents();  // throws thd::Error when the pipe cannot be made
  ~SignalEvents();
  SignalEvents(const SignalEvents&) = delete;
  SignalEvents& operator=(const SignalEvents&) = delete;

  // Readable when a signal has arrived.
  int fd() const noexcept { return read_end_.get(); }
  // The next signal that arrived, without waiting; nullopt when there is none.
  std::optional<int> next();

  // For a forked child before exec (which must fork with every signal blocked, so
  // that no handler of thdrun's runs in it): the dispositions and the signal mask
  // thdrun started with. Async-signal-safe.
  void restore_in_child() const noexcept;

 private:
  struct Saved {
    int sig = 0;
    struct sigaction action {};
  };
  void restore_actions() const noexcept;

  UniqueFd read_end_;
  UniqueFd write_end_;
  std::array<Saved, kForwardedSignals.size() + 2> saved_{};  // + SIGCHLD, SIGPIPE
  size_t saved_count_ = 0;
  sigset_t original_mask_{};
};

}  // namespace thd::launch
