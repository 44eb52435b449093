// Ranks as threads of this process over one shared HashStore: the fast harness
// most of the suite runs on. Every rank's exception becomes a test failure naming
// the rank, and a watchdog ends the test process if a rank never returns, so a
// broken backend fails fast instead of hanging ctest.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <thd/datachannel.h>
#include <thd/store.h>

namespace thd::conformance {

// The channel timeout of the tests that expect success: long enough for a busy
// 2-core CI machine, short enough that a lost message fails the test in seconds.
inline constexpr std::chrono::milliseconds kChannelTimeout{15000};
// How long a world's rank threads may run before the test process gives up on them.
inline constexpr std::chrono::milliseconds kWatchdog{60000};

// A barrier among the rank threads of one world (test coordination, not the
// DataChannel's barrier). Once any rank failed it is broken: every waiter throws,
// so the others stop at once instead of waiting for their timeouts.
class ThreadSync {
 public:
  explicit ThreadSync(int parties, std::chrono::milliseconds timeout = kWatchdog);
  // Across processes (launched ranks): the parties meet through keys of `store`.
  ThreadSync(int parties, std::shared_ptr<Store> store, std::chrono::milliseconds timeout = kWatchdog);
  void arrive_and_wait();
  void break_all();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int parties_;
  const std::chrono::milliseconds timeout_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool broken_ = false;
  std::shared_ptr<Store> store_;
};

// What a rank's body gets.
struct RankEnv {
  DataChannel& dc;
  int rank;
  int size;
  ThreadSync& sync;
  // The world's store, for ranks that make more channels over it.
  std::shared_ptr<Store> store;
};

struct WorldOptions {
  std::chrono::milliseconds timeout = kChannelTimeout;
  std::chrono::milliseconds watchdog = kWatchdog;
};

// The world channel of `rank` over `backend` and `store`, with the suite's token
// and options.timeout: what both harnesses give a rank's body.
std::shared_ptr<DataChannel> make_world_channel(const std::string& backend, const std::shared_ptr<Store>& store,
                                                int rank, int n, const WorldOptions& options);

// Runs body(rank) on `n` threads and returns each rank's exception (nullptr for
// none). A rank that throws breaks `sync`. Ends the process (after a test failure
// naming the stuck ranks) if the threads are not done within `watchdog`.
std::vector<std::exception_ptr> run_threads(int n, const std::function<void(int rank)>& body,
                                            std::chrono::milliseconds watchdog, ThreadSync* sync = nullptr);

// Creates a world of n ranks over `backend` (rank r on thread r, all over one
// HashStore) and runs body on every rank; returns each rank's exception.
std::vector<std::exception_ptr> run_world_collect(const std::string& backend, int n,
                                                  const std::function<void(RankEnv&)>& body,
                                                  const WorldOptions& options = {});

// As run_world_collect, and every rank's exception is a test failure.
void run_world(const std::string& backend, int n, const std::function<void(RankEnv&)>& body,
               const WorldOptions& options = {});

// Adds a test failure for every rank that failed.
void report_rank_errors(const std::vector<std::exception_ptr>& errors);

}  // namespace thd::conformance
