// What every fuzz target shares: the libFuzzer entry point each one defines (in its
// own file), and the check for an invariant of the code under test.
//
// A target catches thd::Error, the answer thd gives to bad input; anything else
// that escapes LLVMFuzzerTestOneInput is a finding (libFuzzer reports the uncaught
// exception as a crash with its input, the g++ replay test as a failure naming the
// file). A broken invariant aborts the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace thd::fuzz {

[[noreturn]] inline void invariant_failed(const char* what, const char* detail, const char* file, int line) {
  std::fprintf(stderr, "fuzz invariant broken at %s:%d: %s%s%s\n", file, line, what, detail[0] != '\0' ? ": " : "",
               detail);
  std::abort();
}

}  // namespace thd::fuzz

// THD_FUZZ_CHECK(replies_verify, "a reply failed verification"): aborts (a finding)
// when the condition does not hold.
#define THD_FUZZ_CHECK(cond, what)                                                 \
  do {                                                                             \
    if (!(cond)) ::thd::fuzz::invariant_failed(what, #cond, __FILE__, __LINE__);   \
  } while (0)
