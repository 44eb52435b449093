#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include <thd/error.h>
#include <thd/tensor.h>

#include "scoped_env.h"
#include "tensor/cpu_allocator.h"
#include "tensor/env_setting.h"
#include "tensor/parallel.h"

namespace thd::detail {
namespace {

constexpr WholeNumberSetting kSpin{.name = "THD_TEST_SPIN_US", .max = 1000, .unit = "microseconds",
                                   .min_note = "never spin"};

// The message of the ValueError that `parse(text)` throws; empty (and a failure) when
// it accepts the text.
template <typename Parse>
std::string refusal_of(Parse parse, const std::string& text) {
  try {
    (void)parse(text);
    ADD_FAILURE() << "'" << text << "' accepted";
  } catch (const ValueError& e) {
    return e.what();
  }
  return {};
}

std::string refusal(const WholeNumberSetting& setting, const std::string& text) {
  return refusal_of([&](const std::string& t) { return parse_whole_number(setting, t, "test"); }, text);
}

TEST(EnvSetting, WholeNumbersWithinTheRangeAreTaken) {
  EXPECT_EQ(parse_whole_number(kSpin, "0", "test"), 0u);
  EXPECT_EQ(parse_whole_number(kSpin, "250", "test"), 250u);
  EXPECT_EQ(parse_whole_number(kSpin, "1000", "test"), 1000u);
  EXPECT_EQ(parse_whole_number(kSpin, "007", "test"), 7u);
  const WholeNumberSetting any{.name = "THD_TEST_BYTES"};
  EXPECT_EQ(parse_whole_number(any, "18446744073709551615", "test"), UINT64_MAX);
}

TEST(EnvSetting, UnsetOrEmptyLeavesTheDefault) {
  EXPECT_EQ(parse_whole_number(kSpin, std::nullopt, "test"), std::nullopt);
  EXPECT_EQ(parse_whole_number(kSpin, "", "test"), std::nullopt);
}

TEST(EnvSetting, BadTextIsRefusedNamingTheVariableTheTextAndTheRange) {
  for (const char* bad : {"fast", "5ms", "5 ", " 5", "-1", "+5", "0x10", "1.5", "1e3", "1001",
                          "99999999999999999999999"}) {
    SCOPED_TRACE(bad);
    const std::string message = refusal(kSpin, bad);
    EXPECT_NE(message.find("THD_TEST_SPIN_US must be a whole number of microseconds from 0 (never spin) to 1000"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(std::string("not '") + bad + "'"), std::string::npos) << message;
  }
}

TEST(EnvSetting, TheMessageStatesALowerBoundAlone) {
  const WholeNumberSetting at_least{.name = "THD_TEST_LIMIT", .min = 1024, .unit = "bytes", .min_note = "1 KiB"};
  EXPECT_EQ(parse_whole_number(at_least, "99999999999", "test"), 99999999999u);
  const std::string message = refusal(at_least, "1023");
  EXPECT_NE(message.find("THD_TEST_LIMIT must be a whole number of bytes, at least 1024 (1 KiB), not '1023'"),
            std::string::npos)
      << message;
}

TEST(EnvSetting, ANumberPastTheLargestSaysSo) {
  const std::string message = refusal({.name = "THD_TEST_COUNT"}, "18446744073709551616");
  EXPECT_NE(message.find("THD_TEST_COUNT must be a whole number, not '18446744073709551616' (the largest is "
                         "18446744073709551615)"),
            std::string::npos)
      << message;
  EXPECT_NE(refusal({.name = "THD_TEST_COUNT"}, "-0").find("THD_TEST_COUNT"), std::string::npos);
}

TEST(EnvSetting, ReadsTheProcessEnvironment) {
  {
    test::ScopedEnv set("THD_TEST_SPIN_US", "12");
    EXPECT_EQ(read_whole_number(kSpin, "test"), 12u);
  }
  {
    test::ScopedEnv unset("THD_TEST_SPIN_US", nullptr);
    EXPECT_EQ(read_whole_number(kSpin, "test"), std::nullopt);
  }
  test::ScopedEnv bad("THD_TEST_SPIN_US", "12us");
  EXPECT_THROW((void)read_whole_number(kSpin, "test"), ValueError);
}

TEST(EnvSetting, TheCpuCacheBoundRefusesAnythingButBytes) {
  EXPECT_EQ(cpu_cache_limit(std::nullopt), CpuAllocator::kDefaultCacheBytes);
  EXPECT_EQ(cpu_cache_limit(""), CpuAllocator::kDefaultCacheBytes);
  EXPECT_EQ(cpu_cache_limit("0"), 0u);
  EXPECT_EQ(cpu_cache_limit("4194304"), size_t{4} << 20);
  for (const std::string bad : {"1G", "abc", "-1", "64 MiB", "2e9"}) {
    const std::string message = refusal_of([](const std::string& t) { return cpu_cache_limit(t); }, bad);
    EXPECT_NE(message.find("THD_CPU_CACHE_BYTES must be a whole number of bytes, not '" + bad + "'"),
              std::string::npos)
        << message;
  }
}

TEST(EnvSetting, ThePoolSizeRefusesAnythingButACount) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(pool_threads(std::nullopt), cores);
  EXPECT_EQ(pool_threads(""), cores);
  EXPECT_EQ(pool_threads("0"), cores);
  EXPECT_EQ(pool_threads("3"), 3);
  EXPECT_EQ(pool_threads(std::to_string(kMaxThreads)), kMaxThreads);
  for (const std::string& bad : {std::string("four"), std::string("4x"), std::string("-2"), std::string("1.5"),
                                 std::to_string(kMaxThreads + 1)}) {
    const std::string message = refusal_of([](const std::string& t) { return pool_threads(t); }, bad);
    EXPECT_NE(message.find("THD_NUM_THREADS must be a whole number from 0 (one per core) to 4096, not '" + bad + "'"),
              std::string::npos)
        << message;
  }
}

// The allocator and the pool read their settings once per process, at their first
// use: each case runs in a child process of its own (a fresh copy of this binary),
// which prints the error and exits 0 when the first tensor op refuses the value.
void exit_0_when_refused(const char* name, const char* value, void (*first_use)()) {
  ::setenv(name, value, 1);
  try {
    first_use();
  } catch (const ValueError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(0);
  }
  std::exit(1);
}

TEST(EnvSettingDeathTest, ABadCacheBoundFailsTheFirstAllocation) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(exit_0_when_refused("THD_CPU_CACHE_BYTES", "1G", [] { (void)Tensor::empty({4}); }),
              ::testing::ExitedWithCode(0), "THD_CPU_CACHE_BYTES must be a whole number of bytes, not '1G'");
}

TEST(EnvSettingDeathTest, ABadThreadCountFailsTheFirstParallelOp) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(exit_0_when_refused("THD_NUM_THREADS", "abc",
                                  [] { parallel_for(0, 2 * kGrainSize, kGrainSize, [](int64_t, int64_t) {}); }),
              ::testing::ExitedWithCode(0), "THD_NUM_THREADS must be a whole number from 0 .* not 'abc'");
}

}  // namespace
}  // namespace thd::detail
