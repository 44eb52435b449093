// Interrupting thd's blocking waits from the host program.
#pragma once

#include <chrono>

namespace thd {

// A check the host installs to interrupt long waits: the calls that block
// (DistributedTensor::get, synchronize, stream and event waits, flow control,
// the DataChannel's waits and collectives) run it from the waiting thread at
// least every kInterruptCheckPeriod. It returns to let the wait go on, or throws
// to end it: the call then ends with that exception, as it would at its timeout
// (a receive is withdrawn, the work already sent to workers still runs, the
// session stays usable). Python's module installs one that raises
// KeyboardInterrupt on Ctrl-C. Null (the default) removes it.
//
// The check is called with none of thd's locks held, so it may block (take the
// GIL); it must be thread-safe.
using InterruptCheck = void (*)();
void set_interrupt_check(InterruptCheck check) noexcept;

inline constexpr std::chrono::milliseconds kInterruptCheckPeriod{100};

namespace detail {
// True when a check is installed: waits without one are not cut into periods.
bool interrupt_check_installed() noexcept;
// Runs the installed check, if any (it may throw).
void check_interrupt();
}  // namespace detail

}  // namespace thd
