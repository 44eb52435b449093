#include "datachannel/collective_engine.h"

#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "datachannel/check.h"
#include "datachannel/fiber.h"
#include "datachannel/net/thread_name.h"
#include "datachannel/transport.h"
#include "tensor/env_setting.h"

namespace thd::detail {

namespace {

struct Job {
  Job(CollectiveEngine::Task task, CollectiveEngine::Done done) : fiber(std::move(task)), done(std::move(done)) {}
  Fiber fiber;
  CollectiveEngine::Done done;
  // What the suspended task waits for: a request (nullptr: only the time) and when
  // it goes on regardless.
  RequestState* awaited = nullptr;
  net::Deadline wake_at{};
  // Whether the lane drove the transport for it since it last suspended.
  bool driven = false;
};

// How long a lane with nothing runnable drives the transport for the request its
// latest task waits for (Transport::wait: spin, then poll) before it sleeps: a small
// collective's next message usually comes within it, and is then taken off the
// socket by the lane itself rather than handed over by the progress thread (two
// wake-ups per message). Driven in slices, and left as soon as another task can
// run or another request of the lane finished.
constexpr std::chrono::microseconds kDrive{200};
constexpr std::chrono::microseconds kDriveSlice{20};

// For as long as a lane sleeps, each transport its waiting tasks wait on knows it
// (Transport::begin_external_wait), once: its own progress serves their messages
// meanwhile instead of standing down as it does after a waiter that drove it, which
// is what the lane looks like once its drive ends.
class ExternalWaits {
 public:
  ExternalWaits(const std::vector<Job*>& waiting, std::vector<Transport*>& transports) : transports_(transports) {
    transports_.clear();
    for (const Job* job : waiting) {
      Transport* const t = job->awaited == nullptr ? nullptr : job->awaited->engine;
      if (t == nullptr || std::find(transports_.begin(), transports_.end(), t) != transports_.end()) continue;
      try {
        transports_.push_back(t);
      } catch (...) {
        continue;  // out of memory: that transport's progress stands down as before
      }
      t->begin_external_wait();
    }
  }
  ~ExternalWaits() {
    for (Transport* t : transports_) t->end_external_wait();
    transports_.clear();
  }
  ExternalWaits(const ExternalWaits&) = delete;
  ExternalWaits& operator=(const ExternalWaits&) = delete;

 private:
  std::vector<Transport*>& transports_;
};

}  // namespace

// One thread and the tasks it runs. Tasks never move between lanes: a fiber's frames
// may hold addresses of its thread's thread_local variables.
struct CollectiveEngine::Lane {
  void start(Task task, Done done);
  void request_finished() noexcept;

  void serve();
  // Under mu_: moves the waiting jobs whose request finished or whose time came to
  // ready_; returns the earliest wake-up among those left.
  net::Deadline collect_ready();
  void run(Job* job);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> ready_;
  std::vector<Job*> waiting_;
  std::vector<Transport*> external_waits_;  // ExternalWaits' list, kept for its capacity
  // Set by a finishing request: the lane looks at its waiting jobs again. The
  // request's thread takes the mutex only when this was clear.
  std::atomic<bool> kicked_{false};
  std::thread thread_;
  uint32_t number_ = 0;  // from 1, as RequestState::on_finish names it
};

namespace {

thread_local CollectiveEngine::Lane* t_lane = nullptr;
thread_local Job* t_job = nullptr;

}  // namespace

int collective_threads_from(const std::optional<std::string>& value) {
  const WholeNumberSetting setting{.name = "THD_COLLECTIVE_THREADS", .min = 1, .max = CollectiveEngine::kMaxThreads};
  return static_cast<int>(parse_whole_number(setting, value, "collective").value_or(1));
}

namespace {

// Never destroyed: its threads may be parked in it while the process exits.
std::atomic<CollectiveEngine*> g_engine{nullptr};
std::mutex g_engine_mu;

// A child of fork() has none of the lane threads: it starts an engine of its own at
// its first async collective. The parent's is left as it is (its locks may be held
// by threads the child does not have).
void forget_engine_in_child() {
  g_engine.store(nullptr);
  new (&g_engine_mu) std::mutex;
  Fiber::forget_stacks_in_child();
}

}  // namespace

CollectiveEngine& CollectiveEngine::instance() {
  if (CollectiveEngine* engine = g_engine.load(std::memory_order_acquire)) return *engine;
  std::lock_guard lock(g_engine_mu);
  if (CollectiveEngine* engine = g_engine.load(std::memory_order_acquire)) return *engine;
  static const int registered = ::pthread_atfork(nullptr, nullptr, &forget_engine_in_child);
  (void)registered;
  auto* engine = new CollectiveEngine(collective_threads_from(env_value("THD_COLLECTIVE_THREADS")));
  g_engine.store(engine, std::memory_order_release);
  return *engine;
}

CollectiveEngine::CollectiveEngine(int threads) : lanes_(new Lane[static_cast<size_t>(threads)]), count_(threads) {
  for (int i = 0; i < threads; ++i) lanes_[i].number_ = static_cast<uint32_t>(i + 1);
}

void collective_lane_request_finished(uint32_t lane) noexcept {
  // A request names a lane only once the engine exists (its task ran there); in a
  // child of fork() the parent's requests may name lanes of an engine not yet made.
  CollectiveEngine* const engine = g_engine.load(std::memory_order_acquire);
  if (engine != nullptr && lane <= static_cast<uint32_t>(engine->count_)) engine->lanes_[lane - 1].request_finished();
}

int CollectiveEngine::threads() const noexcept { return count_; }

int CollectiveEngine::pick_lane() noexcept {
  return static_cast<int>(next_lane_.fetch_add(1, std::memory_order_relaxed) % static_cast<unsigned>(count_));
}

void CollectiveEngine::start(int lane, Task task, Done done) {
  lanes_[lane].start(std::move(task), std::move(done));
}

bool CollectiveEngine::on_task() noexcept { return t_job != nullptr && Fiber::current() != nullptr; }

uint32_t CollectiveEngine::finish_lane() noexcept { return on_task() ? t_lane->number_ : 0; }

bool CollectiveEngine::await(RequestState& request, net::Deadline until) {
  Job* const job = t_job;
  if (request.finished()) return true;
  job->awaited = &request;
  job->wake_at = until;
  job->driven = false;
  job->fiber.suspend();
  job->awaited = nullptr;
  return request.finished();
}

void CollectiveEngine::pause(std::chrono::microseconds duration) {
  if (!on_task()) {
    std::this_thread::sleep_for(duration);
    return;
  }
  Job* const job = t_job;
  job->awaited = nullptr;
  job->wake_at = net::Clock::now() + duration;
  job->fiber.suspend();
}

void CollectiveEngine::Lane::start(Task task, Done done) {
  auto job = std::make_unique<Job>(std::move(task), std::move(done));
  {
    std::lock_guard lock(mu_);
    // The thread starts with the lane's first task: a process without async
    // collectives has none.
    if (!thread_.joinable()) thread_ = std::thread([this] {
      net::name_this_thread("thd-collectives");
      serve();
    });
    ready_.push_back(job.release());
    // Ends a drive of the transport (serve) at once: this task can run.
    kicked_.store(true);
  }
  cv_.notify_one();
}

void CollectiveEngine::Lane::request_finished() noexcept {
  if (kicked_.exchange(true)) return;
  // Taking the mutex orders this with the lane's last look at its waiting jobs: it
  // either saw this request finished, or is waiting and gets the notification.
  { std::lock_guard lock(mu_); }
  cv_.notify_one();
}

net::Deadline CollectiveEngine::Lane::collect_ready() {
  const auto now = net::Clock::now();
  net::Deadline earliest = net::Deadline::max();
  std::erase_if(waiting_, [&](Job* job) {
    if ((job->awaited != nullptr && job->awaited->finished()) || now >= job->wake_at) {
      ready_.push_back(job);
      return true;
    }
    earliest = std::min(earliest, job->wake_at);
    return false;
  });
  return earliest;
}

void CollectiveEngine::Lane::serve() {
  t_lane = this;
  std::unique_lock lock(mu_);
  for (;;) {
    // Cleared before the look: a request finishing after it sets it again.
    kicked_.store(false);
    const net::Deadline earliest = collect_ready();
    if (!ready_.empty()) {
      Job* job = ready_.front();
      ready_.pop_front();
      lock.unlock();
      run(job);
      lock.lock();
      continue;
    }
    // Nothing runnable: drive the transport a moment for the newest waiter, once.
    Job* newest = waiting_.empty() ? nullptr : waiting_.back();
    if (newest != nullptr && !newest->driven && newest->awaited != nullptr && newest->awaited->engine != nullptr) {
      newest->driven = true;
      RequestState& awaited = *newest->awaited;
      const net::Deadline until = std::min(newest->wake_at, net::Clock::now() + kDrive);
      lock.unlock();
      try {
        for (auto now = net::Clock::now(); now < until && !kicked_.load(); now = net::Clock::now()) {
          if (awaited.engine->wait(awaited, std::min(until, now + kDriveSlice))) break;
        }
      } catch (...) {
        // The task sees its request's own error when it resumes.
      }
      lock.lock();
      continue;
    }
    const auto woken = [&] { return kicked_.load() || !ready_.empty(); };
    if (waiting_.empty()) {
      cv_.wait(lock, woken);
    } else {
      // The waiting tasks' transports serve them while the lane sleeps. Their
      // tasks, suspended, keep them alive until the lane runs one again.
      const ExternalWaits external(waiting_, external_waits_);
      cv_.wait_until(lock, earliest, woken);
    }
  }
}

void CollectiveEngine::Lane::run(Job* job) {
  t_job = job;
  job->fiber.resume();
  t_job = nullptr;
  if (!job->fiber.finished()) {
    std::lock_guard lock(mu_);
    waiting_.push_back(job);
    return;
  }
  Done done = std::move(job->done);
  delete job;
  done();
}

}  // namespace thd::detail
