#include "rank_threads.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "backends.h"
#include "checks.h"
#include "datachannel/test_util.h"
#include "rank_launched.h"

namespace thd::conformance {

ThreadSync::ThreadSync(int parties, std::chrono::milliseconds timeout) : parties_(parties), timeout_(timeout) {}

ThreadSync::ThreadSync(int parties, std::shared_ptr<Store> store, std::chrono::milliseconds timeout)
    : parties_(parties), timeout_(timeout), store_(std::move(store)) {}

void ThreadSync::arrive_and_wait() {
  if (store_) {
    // Generation g: every party adds 1 to sync/g; the last one sets sync/g/done.
    // A failed party sets sync/broken, which the others notice between short waits.
    const std::string key = "sync/" + std::to_string(++generation_);
    if (store_->add(key, 1) == parties_) store_->set(key + "/done", std::string_view("1"));
    const auto until = std::chrono::steady_clock::now() + timeout_;
    while (!store_->check({key + "/done"})) {
      if (store_->check({"sync/broken"})) fail("another rank failed before this one reached the test's sync point");
      if (std::chrono::steady_clock::now() > until) fail("not every rank reached the test's sync point in time");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return;
  }
  std::unique_lock lock(mu_);
  if (broken_) fail("another rank failed before this one reached the test's sync point");
  const uint64_t generation = generation_;
  if (++arrived_ == parties_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  const bool released =
      cv_.wait_for(lock, timeout_, [&] { return broken_ || generation_ != generation; });
  if (generation_ != generation) return;
  if (broken_) fail("another rank failed before every rank reached the test's sync point");
  if (!released) fail("not every rank reached the test's sync point in time");
}

void ThreadSync::break_all() {
  if (store_) {
    try {
      store_->set("sync/broken", std::string_view("1"));
    } catch (const std::exception&) {
      // The store is gone too: the others find out at their own deadline.
    }
    return;
  }
  std::lock_guard lock(mu_);
  broken_ = true;
  cv_.notify_all();
}

std::vector<std::exception_ptr> run_threads(int n, const std::function<void(int rank)>& body,
                                            std::chrono::milliseconds watchdog, ThreadSync* sync) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::exception_ptr> errors;
    std::vector<bool> finished;
    int done = 0;
  };
  auto shared = std::make_shared<Shared>();
  shared->errors.resize(static_cast<size_t>(n));
  shared->finished.resize(static_cast<size_t>(n));

  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([shared, body, sync, r] {
      std::exception_ptr error;
      try {
        body(r);
      } catch (...) {
        error = std::current_exception();
        if (sync != nullptr) sync->break_all();
      }
      std::lock_guard lock(shared->mu);
      shared->errors[static_cast<size_t>(r)] = error;
      shared->finished[static_cast<size_t>(r)] = true;
      ++shared->done;
      shared->cv.notify_all();
    });
  }

  std::unique_lock lock(shared->mu);
  if (!shared->cv.wait_for(lock, watchdog, [&] { return shared->done == n; })) {
    std::string stuck;
    for (int r = 0; r < n; ++r) {
      if (!shared->finished[static_cast<size_t>(r)]) stuck += " " + std::to_string(r);
    }
    ADD_FAILURE() << "rank threads" << stuck << " still running after " << watchdog.count()
                  << " ms: an operation ignored its deadline (a hang). Ending the test process, since the "
                     "threads cannot be stopped.";
    std::fflush(nullptr);
    std::_Exit(1);
  }
  lock.unlock();
  for (auto& t : threads) t.join();
  return shared->errors;
}

std::shared_ptr<DataChannel> make_world_channel(const std::string& backend, const std::shared_ptr<Store>& store,
                                                int rank, int n, const WorldOptions& options) {
  DataChannelOptions o;
  o.store = store;
  o.rank = rank;
  o.world_size = n;
  o.timeout = options.timeout;
  o.token = std::string(test::kToken);
  return DataChannel::create(backend, o);
}

std::vector<std::exception_ptr> run_world_collect(const std::string& backend, int n,
                                                  const std::function<void(RankEnv&)>& body,
                                                  const WorldOptions& options) {
  if (traits_of(backend).launched_ranks) return run_launched_world(backend, n, body, options);
  auto store = std::make_shared<HashStore>(options.timeout);
  ThreadSync sync(n, options.watchdog);
  return run_threads(
      n,
      [&](int r) {
        std::shared_ptr<DataChannel> dc = make_world_channel(backend, store, r, n, options);
        RankEnv env{*dc, r, n, sync, store};
        body(env);
        // Every rank is done before any channel closes: teardown is not what the
        // test is about.
        sync.arrive_and_wait();
      },
      options.watchdog, &sync);
}

void run_world(const std::string& backend, int n, const std::function<void(RankEnv&)>& body,
               const WorldOptions& options) {
  report_rank_errors(run_world_collect(backend, n, body, options));
}

void report_rank_errors(const std::vector<std::exception_ptr>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) {
    if (errors[r]) ADD_FAILURE() << "rank " << r << ": " << describe(errors[r]);
  }
}

}  // namespace thd::conformance
