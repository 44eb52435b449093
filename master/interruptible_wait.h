// The master's condition-variable waits, cut into periods for the host's
// interrupt check (thd/interrupt.h).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include <thd/interrupt.h>

namespace thd::master {

// Waits on `cv` until notified, `deadline` or one kInterruptCheckPeriod, then runs
// the interrupt check with `lock` released: the check may wait for the GIL, which a
// thread blocked on this lock may hold. Callers test their condition and their
// deadline around it, in a loop.
inline void wait_interruptibly(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                               std::chrono::steady_clock::time_point deadline) {
  cv.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() + kInterruptCheckPeriod));
  lock.unlock();
  detail::check_interrupt();
  lock.lock();
}

}  // namespace thd::master
