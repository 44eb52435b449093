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

// ThreadSanitizer in particular: it maps shadow memory (several bytes per byte) for
// every range a process touches, so resident memory grows several times what the
// program itself holds.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kUnderThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kUnderThreadSanitizer = true;
#else
inline constexpr bool kUnderThreadSanitizer = false;
#endif
#else
inline constexpr bool kUnderThreadSanitizer = false;
#endif

}  // namespace thd::test
