// Whether a waiting thread spins before it blocks, in the tcp backend and the pipe
// transport (docs/backend_tcp.md, "Waiting: spin, then block").
//
// Spinning turns a message's arrival into a finished wait within a microsecond or
// so, where blocking costs a wake-up (tens of microseconds, far more on an idle
// virtual machine). It stops paying when the spinner takes a CPU that another
// thread (often the very peer it waits for) needs. So a wait spins for the budget
// unless spinning has recently been seen to cost others their CPU:
//   - a spin during which the thread was descheduled (a gap of kDescheduledGap:
//     it lost its CPU to another runnable thread), or
//   - a spin that ran out without its request while the machine had more
//     runnable threads than cores (RunQueue);
// the first doubles a pause (up to kMaxPause waits) during which waits block at
// once, the second lengthens it by one wait; a spin that ends with its request
// halves it. (A spin runs out in a ping-pong whenever the peer blocked, whether or
// not a third thread wanted the core: doubling on it locked two ranks on a busy
// machine into blocking for thousands of round trips; a descheduled spinner is the
// sure sign.) A pause ends with one probing
// spin, so spinning resumes when the load goes away. A job that is oversubscribed
// from the start (more ranks on this host than cores: 4 ranks on 2 cores) starts
// paused at the maximum.
//
// A spin that runs out on an otherwise idle machine (the peer is computing, or
// blocked itself) is not held against spinning: it cost at most the budget of a
// CPU nobody else wanted, and counting it would trap the two ranks of a ping-pong
// in blocking (each one's spins fail because the other blocks).
//
// THD_TCP_SPIN_US sets the budget in microseconds (default 50; 0 never spins): a
// spin ends when that long passes without this rank's I/O moving a byte (longer
// mid-stream: stall_limit).
// Thread-safe: waits on several threads share one policy.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace thd::detail {

inline constexpr std::chrono::microseconds kDefaultSpinBudget{50};

class SpinPolicy {
 public:
  // `budget`: the spin budget (zero: never spin); `oversubscribed`: start paused.
  SpinPolicy(std::chrono::microseconds budget, bool oversubscribed);

  // The budget for the next wait: the spin budget, or zero to block at once.
  std::chrono::nanoseconds budget() noexcept;
  enum class Outcome {
    Completed,    // the request finished while spinning
    RanOut,       // the budget passed with nothing moving
    Descheduled,  // the spinner lost its CPU
  };
  // A wait that spun reports how; `machine_busy`: more runnable threads than cores
  // (asked only for RanOut).
  void record_spin(Outcome outcome, bool machine_busy) noexcept;

  // How long a spin goes on with nothing moving: the budget, or while a frame is
  // partly through a connection (`mid_stream`) at least kMidStreamStall. Mid-stream
  // the next bytes are due as soon as the peer's side catches up (it drains or
  // refills a socket buffer, a few hundred microseconds at loopback speeds); a
  // waiter that blocked there would take a wake-up per socket buffer, and make its
  // peer block too: a large transfer then runs at about 0.65x of a busy-polled
  // plain socket on a 2-core VM.
  static std::chrono::nanoseconds stall_limit(std::chrono::nanoseconds budget, bool mid_stream) noexcept {
    return mid_stream ? std::max<std::chrono::nanoseconds>(budget, kMidStreamStall) : budget;
  }

  // The budget asked for, paused or not.
  std::chrono::nanoseconds configured_budget() const noexcept { return budget_; }

  // Waits that will still block at once, for tests and statistics.
  int pause() const noexcept { return pause_.load(); }

  static constexpr int kMaxPause = 1024;
  static constexpr std::chrono::microseconds kDescheduledGap{200};
  static constexpr std::chrono::microseconds kMidStreamStall{1000};

 private:
  const std::chrono::microseconds budget_;
  std::atomic<int> pause_;      // the current pause length, in waits
  std::atomic<int> blocked_{0};  // waits blocked at once in this pause
};

// Whether the machine has more runnable threads than this process has cores, from
// the kernel's count of runnable threads (/proc/loadavg, the field "3/257"),
// sampled at most every kSampleInterval. Where that count cannot be read it says
// busy: blocking is the safe side.
class RunQueue {
 public:
  explicit RunQueue(int cpus);
  ~RunQueue();
  RunQueue(const RunQueue&) = delete;
  RunQueue& operator=(const RunQueue&) = delete;

  bool busy() noexcept;

  static constexpr std::chrono::milliseconds kSampleInterval{10};

 private:
  const int cpus_;
  int fd_ = -1;  // /proc/loadavg, kept open: one pread() per sample
  std::atomic<int64_t> next_sample_ns_{0};
  std::atomic<bool> busy_{true};
  std::atomic<bool> sampling_{false};
};

// The runnable-thread count of a /proc/loadavg line ("0.52 0.58 0.59 3/257 1234"
// gives 3); -1 for anything else.
int parse_runnable(std::string_view loadavg);

// THD_TCP_SPIN_US parsed: nullopt when unset or empty; ValueError for anything but
// a decimal count of microseconds (at most one second).
std::optional<std::chrono::microseconds> parse_spin_us(const std::optional<std::string>& value);

// The CPUs this process may run on (its affinity mask), at least 1.
int usable_cpus() noexcept;

}  // namespace thd::detail
