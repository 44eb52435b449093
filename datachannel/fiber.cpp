#include "datachannel/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <new>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define THD_FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define THD_FIBER_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define THD_FIBER_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define THD_FIBER_TSAN 1
#endif
#endif

#ifdef THD_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef THD_FIBER_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace thd::detail {

namespace {

// Room for an algorithm's frames, the reduction kernels, fmt and a throw's unwinding,
// several times over (a sanitizer's red zones make frames larger). Only the pages
// touched take memory.
constexpr size_t kStackBytes = size_t{1} << 20;
// Stacks kept mapped for the next fibers: a job's collectives in flight at once.
constexpr size_t kKeptStacks = 16;

thread_local Fiber* t_current = nullptr;

struct StackPool {
  std::mutex mu;
  std::vector<std::pair<void*, size_t>> free;
};

// Never destroyed: a fiber may finish while the process exits.
std::atomic<StackPool*> g_pool{new StackPool};

StackPool& stack_pool() { return *g_pool.load(std::memory_order_acquire); }

}  // namespace

Fiber::Stack Fiber::take_stack() {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  Stack s;
  s.mapped = kStackBytes + page;
  {
    StackPool& pool = stack_pool();
    std::lock_guard lock(pool.mu);
    if (!pool.free.empty()) {
      s.base = pool.free.back().first;
      pool.free.pop_back();
    }
  }
  if (s.base == nullptr) {
    void* p = ::mmap(nullptr, s.mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    // The lowest page faults an overflow instead of letting it write elsewhere.
    if (::mprotect(p, page, PROT_NONE) != 0) {
      ::munmap(p, s.mapped);
      throw std::bad_alloc();
    }
    s.base = p;
  }
  s.bottom = static_cast<uint8_t*>(s.base) + page;
  s.size = kStackBytes;
  return s;
}

void Fiber::give_back(Stack stack) noexcept {
  if (stack.base == nullptr) return;
  StackPool& pool = stack_pool();
  std::lock_guard lock(pool.mu);
  if (pool.free.size() < kKeptStacks) {
    try {
      pool.free.emplace_back(stack.base, stack.mapped);
      return;
    } catch (...) {
    }
  }
  ::munmap(stack.base, stack.mapped);
}

Fiber::Fiber(std::function<void()> body) : body_(std::move(body)) {}

Fiber::~Fiber() {
#ifdef THD_FIBER_TSAN
  if (tsan_fiber_ != nullptr) __tsan_destroy_fiber(tsan_fiber_);
#endif
  give_back(stack_);
}

Fiber* Fiber::current() noexcept { return t_current; }

void Fiber::forget_stacks_in_child() noexcept {
  try {
    g_pool.store(new StackPool, std::memory_order_release);
  } catch (...) {
    // Out of memory in a fresh child: it keeps the parent's pool.
  }
}

void Fiber::entry(unsigned high, unsigned low) {
  auto* self = reinterpret_cast<Fiber*>((static_cast<uintptr_t>(high) << 32) | static_cast<uintptr_t>(low));
#ifdef THD_FIBER_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &self->caller_bottom_, &self->caller_size_);
#endif
  try {
    self->body_();
  } catch (...) {
    // The body reports its own errors; one escaping has nowhere to go.
    std::terminate();
  }
  self->finished_ = true;
  self->leave(/*last=*/true);
}

void Fiber::resume() {
  if (finished_) return;
  if (!started_) {
    stack_ = take_stack();
    if (::getcontext(&context_) != 0) throw std::bad_alloc();
    context_.uc_stack.ss_sp = stack_.bottom;
    context_.uc_stack.ss_size = stack_.size;
    context_.uc_link = nullptr;
    const auto address = reinterpret_cast<uintptr_t>(this);
    // makecontext passes int arguments: the address goes in two halves.
    ::makecontext(&context_, reinterpret_cast<void (*)()>(&Fiber::entry), 2,
                  static_cast<unsigned>(address >> 32), static_cast<unsigned>(address & 0xffffffffu));
#ifdef THD_FIBER_TSAN
    tsan_fiber_ = __tsan_create_fiber(0);
#endif
    started_ = true;
  }
  enter();
}

void Fiber::enter() {
  Fiber* const outer = t_current;
  t_current = this;
#ifdef THD_FIBER_TSAN
  tsan_caller_ = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(tsan_fiber_, 0);
#endif
#ifdef THD_FIBER_ASAN
  void* caller_fake = nullptr;
  __sanitizer_start_switch_fiber(&caller_fake, stack_.bottom, stack_.size);
#endif
  ::swapcontext(&caller_, &context_);
#ifdef THD_FIBER_ASAN
  __sanitizer_finish_switch_fiber(caller_fake, nullptr, nullptr);
#endif
  t_current = outer;
}

void Fiber::suspend() { leave(/*last=*/false); }

void Fiber::leave(bool last) {
#ifdef THD_FIBER_TSAN
  __tsan_switch_to_fiber(tsan_caller_, 0);
#endif
#ifdef THD_FIBER_ASAN
  // The last switch out lets the fiber's fake stack go.
  __sanitizer_start_switch_fiber(last ? nullptr : &fake_stack_, caller_bottom_, caller_size_);
#else
  (void)last;
#endif
  ::swapcontext(&context_, &caller_);
#ifdef THD_FIBER_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_, &caller_bottom_, &caller_size_);
#endif
}

}  // namespace thd::detail
