// Whether this test binary runs under a sanitizer (scripts/test --sanitize): tests
// whose figures the sanitizers change (time, resident memory: ASan keeps freed
// memory in quarantine, LeakSanitizer checks the heap at exit) scale to them.
#pragma once

// g++ names the sanitizer in a macro of its own; clang answers __has_feature.
#if defined(__has_feature)
#define THD_TEST_HAS_FEATURE(name) __has_feature(name)
#else
#define THD_TEST_HAS_FEATURE(name) 0
#endif

namespace thd::test {

inline constexpr bool kUnderAddressSanitizer =
#if defined(__SANITIZE_ADDRESS__) || THD_TEST_HAS_FEATURE(address_sanitizer)
    true;
#else
    false;
#endif

// ThreadSanitizer in particular: it maps shadow memory (several bytes per byte) for
// every range a process touches, so resident memory grows several times what the
// program itself holds.
inline constexpr bool kUnderThreadSanitizer =
#if defined(__SANITIZE_THREAD__) || THD_TEST_HAS_FEATURE(thread_sanitizer)
    true;
#else
    false;
#endif

inline constexpr bool kUnderSanitizer = kUnderAddressSanitizer || kUnderThreadSanitizer;

}  // namespace thd::test

#undef THD_TEST_HAS_FEATURE
