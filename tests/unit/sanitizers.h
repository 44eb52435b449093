// Whether this test binary runs under a sanitizer (scripts/test --sanitize): tests
// whose figures the sanitizers change (time, resident memory: ASan keeps freed
// memory in quarantine, LeakSanitizer checks the heap at exit) scale to them.
#pragma once

namespace thd::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kUnderSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = false;
#endif
#else
inline constexpr bool kUnderSanitizer = false;
#endif

}  // namespace thd::test
