// A hint to the core that this thread is spinning (x86 pause, arm yield): the
// sibling hyperthread gets the pipeline, and leaving the loop costs no pipeline
// flush for memory-order speculation.
#pragma once

namespace thd::net {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace thd::net
