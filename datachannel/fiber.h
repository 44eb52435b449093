// A function that runs on a stack of its own and can stop in the middle of a call
// (suspend) to be resumed later by the thread that started it: how the collective
// engine (collective_engine.h) keeps many collectives at their current step on a
// fixed number of threads, with the algorithms written as plain blocking code.
#pragma once

#include <ucontext.h>

#include <cstddef>
#include <functional>

namespace thd::detail {

class Fiber {
 public:
  // `body` must not throw (it reports its errors otherwise); it runs at the first
  // resume().
  explicit Fiber(std::function<void()> body);
  // A fiber is destroyed finished or never started: a suspended one still has
  // frames on its stack.
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Runs the fiber on this thread until it suspends or its body returns. Not from
  // inside a fiber. A fiber is always resumed by the thread that started it (its
  // frames may hold addresses of that thread's thread_local variables).
  void resume();
  // From inside this fiber: back to the resume() that ran it.
  void suspend();
  bool finished() const noexcept { return finished_; }

  // The fiber running on this thread; nullptr outside any.
  static Fiber* current() noexcept;
  // In a child of fork(): starts a pool of stacks of its own (the parent's lock may
  // be held by a thread the child does not have).
  static void forget_stacks_in_child() noexcept;

 private:
  struct Stack {
    void* base = nullptr;  // the mapping, guard page first
    size_t mapped = 0;
    void* bottom = nullptr;  // the usable part
    size_t size = 0;
  };
  static Stack take_stack();
  static void give_back(Stack stack) noexcept;
  static void entry(unsigned high, unsigned low);
  // Into the fiber (from resume) or out of it (from suspend or the body's end).
  void enter();
  void leave(bool last);

  std::function<void()> body_;
  Stack stack_;
  ucontext_t context_{};
  ucontext_t caller_{};
  bool started_ = false;
  bool finished_ = false;
  // Sanitizer bookkeeping: the resuming thread's stack (AddressSanitizer) and the
  // fibers' identities (ThreadSanitizer). Unused otherwise.
  const void* caller_bottom_ = nullptr;
  size_t caller_size_ = 0;
  void* fake_stack_ = nullptr;
  void* tsan_fiber_ = nullptr;
  void* tsan_caller_ = nullptr;
};

}  // namespace thd::detail
