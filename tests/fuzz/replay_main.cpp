// The g++ build's form of a fuzz target: a test that runs LLVMFuzzerTestOneInput
// over every file under the paths it is given (ctest passes the target's seed
// corpus and its regressions; a file path replays one input, e.g. a crash libFuzzer
// saved). No sanitizers here: this catches regressions that crash, abort, break an
// invariant or let an exception escape, in every scripts/test run, without clang.
//
// Every input runs under a stream of signals to the thread that runs it, as under
// libFuzzer, whose -timeout alarm (SIGALRM) lands while the target waits: a wait
// that takes EINTR for the end of the wait is a finding here too, not only in the
// one fuzz run in many that the alarm hits at the wrong moment.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_target.h"

namespace {

namespace fs = std::filesystem;

std::vector<std::string> g_paths;

// How often the running input's thread is interrupted: often enough that a target
// waiting even a few hundred microseconds for a server or a worker is hit.
constexpr long kInterruptEveryNs = 100'000;

void ignore_signal(int) {}

// A SIGALRM every kInterruptEveryNs to the thread that made it, handled without
// SA_RESTART (as libFuzzer's handler is), while it lives.
class InterruptingTimer {
 public:
  InterruptingTimer() {
    struct sigaction action {};
    action.sa_handler = ignore_signal;
    sigemptyset(&action.sa_mask);
    if (::sigaction(SIGALRM, &action, &previous_) != 0) fail("sigaction");
    sigevent event{};
    event.sigev_notify = SIGEV_THREAD_ID;
    event.sigev_signo = SIGALRM;
    event._sigev_un._tid = static_cast<pid_t>(::syscall(SYS_gettid));
    if (::timer_create(CLOCK_MONOTONIC, &event, &timer_) != 0) fail("timer_create");
    itimerspec every{};
    every.it_interval.tv_nsec = kInterruptEveryNs;
    every.it_value.tv_nsec = kInterruptEveryNs;
    if (::timer_settime(timer_, 0, &every, nullptr) != 0) fail("timer_settime");
  }
  ~InterruptingTimer() {
    ::timer_delete(timer_);
    ::sigaction(SIGALRM, &previous_, nullptr);
  }
  InterruptingTimer(const InterruptingTimer&) = delete;
  InterruptingTimer& operator=(const InterruptingTimer&) = delete;

 private:
  [[noreturn]] static void fail(const char* call) {
    std::fprintf(stderr, "replay: %s failed: %s\n", call, std::strerror(errno));
    std::abort();
  }
  struct sigaction previous_ {};
  timer_t timer_{};
};

std::vector<fs::path> inputs_under(const std::string& path) {
  std::vector<fs::path> out;
  if (fs::is_regular_file(path)) return {fs::path(path)};
  if (!fs::is_directory(path)) return out;
  for (const auto& entry : fs::recursive_directory_iterator(path)) {
    // README files explain a directory; they are not inputs.
    if (entry.is_regular_file() && entry.path().filename() != "README.md") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(FuzzReplay, EveryInputRunsCleanly) {
  size_t replayed = 0;
  for (const std::string& path : g_paths) {
    for (const fs::path& file : inputs_under(path)) {
      std::ifstream in(file, std::ios::binary);
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      // Printed first: if the input crashes the process, the log names it.
      std::printf("replaying %s (%zu bytes)\n", file.c_str(), bytes.size());
      std::fflush(stdout);
      try {
        InterruptingTimer interrupting;
        LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      } catch (const std::exception& e) {
        ADD_FAILURE() << file << ": an exception escaped the target: " << e.what();
      }
      ++replayed;
    }
  }
  EXPECT_GT(replayed, 0u) << "no inputs found under the given paths";
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  g_paths.assign(argv + 1, argv + argc);
  return RUN_ALL_TESTS();
}
