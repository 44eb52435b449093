#include "tensor/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "tensor/env_setting.h"

namespace thd::detail {
namespace {

thread_local bool t_in_parallel = false;

// Workers sleep on a condition variable between jobs. A job is a chunk counter that
// the caller and the workers drain together; the caller waits until every chunk it
// handed out has finished.
class ThreadPool {
 public:
  explicit ThreadPool(int threads) { resize(threads); }
  ~ThreadPool() { stop(); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int threads) {
    stop();
    std::lock_guard lock(mu_);
    stopping_ = false;
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  }

  // False (nothing ran) when another thread's job holds the pool: the caller runs
  // its work itself instead of queueing behind that job, so ops of two streams (or
  // two user threads) overlap rather than take turns.
  bool try_run(int64_t chunks, FunctionRef<void(int64_t)> body) {
    std::unique_lock run_lock(run_mu_, std::try_to_lock);
    if (!run_lock.owns_lock()) return false;
    run_locked(chunks, body);
    return true;
  }

 private:
  void run_locked(int64_t chunks, FunctionRef<void(int64_t)> body) {
    {
      std::lock_guard lock(mu_);
      job_ = &body;
      job_chunks_ = chunks;
      next_chunk_.store(0);
      done_chunks_ = 0;
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    drain();
    std::unique_lock lock(mu_);
    // active_ == 0 too: a worker that picked up this job must be out of it before
    // the next job reuses next_chunk_.
    done_cv_.wait(lock, [&] { return done_chunks_ == job_chunks_ && active_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  void worker_loop() {
    t_in_parallel = true;
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || (job_ != nullptr && generation_ != seen); });
        if (stopping_) return;
        seen = generation_;
      }
      drain();
    }
  }

  // Takes chunks until none are left.
  void drain() {
    const FunctionRef<void(int64_t)>* body;
    int64_t chunks;
    {
      std::lock_guard lock(mu_);
      body = job_;
      chunks = job_chunks_;
      if (body == nullptr) return;
      ++active_;
    }
    bool was = t_in_parallel;
    t_in_parallel = true;
    int64_t finished = 0;
    std::exception_ptr err;
    for (int64_t c; (c = next_chunk_.fetch_add(1)) < chunks;) {
      try {
        (*body)(c);
      } catch (...) {
        if (!err) err = std::current_exception();
      }
      ++finished;
    }
    t_in_parallel = was;
    std::lock_guard lock(mu_);
    if (err && !error_) error_ = err;
    done_chunks_ += finished;
    --active_;
    if (done_chunks_ == job_chunks_ && active_ == 0) done_cv_.notify_all();
  }

  std::mutex run_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  std::vector<std::thread> workers_;
  bool stopping_ = false;
  const FunctionRef<void(int64_t)>* job_ = nullptr;
  int64_t job_chunks_ = 0;
  std::atomic<int64_t> next_chunk_{0};
  int64_t done_chunks_ = 0;
  int active_ = 0;  // threads inside drain() for the current job
  uint64_t generation_ = 0;
  std::exception_ptr error_;
};

ThreadPool& pool() {
  // The setting is read by the first call that needs the pool (every one may throw):
  // a bad value fails it, and every later one, with a ValueError.
  static ThreadPool p(pool_threads(env_value("THD_NUM_THREADS")));
  return p;
}

}  // namespace

int pool_threads(const std::optional<std::string>& value) {
  const WholeNumberSetting setting{.name = "THD_NUM_THREADS", .max = kMaxThreads, .min_note = "one per core"};
  const uint64_t n = parse_whole_number(setting, value, "parallel").value_or(0);
  if (n == 0) return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(n);
}

int num_threads() { return pool().size(); }

void set_num_threads(int n) { pool().resize(std::max(1, n)); }

bool in_parallel_region() { return t_in_parallel; }

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  FunctionRef<void(int64_t, int64_t)> fn) {
  if (end <= begin) return;
  int64_t n = end - begin;
  grain = std::max<int64_t>(grain, 1);
  if (n <= grain) {  // one chunk: no need to ask how many threads there are
    fn(begin, end);
    return;
  }
  int threads = t_in_parallel ? 1 : num_threads();
  // A few chunks per thread rather than one: when another process holds a core, the
  // free threads take over the slow thread's share instead of waiting for it.
  constexpr int kChunksPerThread = 4;
  int64_t chunks = threads <= 1 ? 1 : std::min<int64_t>(int64_t{threads} * kChunksPerThread,
                                                        (n + grain - 1) / grain);
  if (chunks <= 1) {
    fn(begin, end);
    return;
  }
  int64_t per = (n + chunks - 1) / chunks;
  const bool pooled = pool().try_run(chunks, [&](int64_t c) {
    int64_t b = begin + c * per;
    int64_t e = std::min(end, b + per);
    if (b < e) fn(b, e);
  });
  if (!pooled) fn(begin, end);
}

}  // namespace thd::detail
