// The collective engine: tasks suspended on their requests let the other tasks of
// their lane run, each resumes when its own request finishes (whatever the order),
// a wait's time bounds a suspension, an idle lane takes no CPU, a child of fork()
// runs tasks on threads of its own, and THD_COLLECTIVE_THREADS is checked.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <thd/error.h>

#include "datachannel/collective_engine.h"
#include "datachannel/collective_queue.h"
#include "datachannel/request_state.h"
#include "datachannel/transport.h"
#include "expect_throw.h"

namespace thd::detail {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::shared_ptr<RequestState> request() {
  return std::make_shared<RequestState>("test", net::Deadline::max(), nullptr, 0);
}

// Waits (bounded) until `done` reaches `count`.
bool reaches(const std::atomic<int>& done, int count, std::chrono::milliseconds within = 10s) {
  const auto until = Clock::now() + within;
  while (done.load() < count) {
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Starts on `lane` a task that suspends on `r` until it finishes (waking at least
// every `slice`), counting `suspended` when it got to its wait and `done` once it
// ended; `after` runs on the task once its request finished.
void start_waiting_task(int lane, RequestState& r, std::atomic<int>& suspended, std::atomic<int>& done,
                        std::function<void()> after = {}, std::chrono::milliseconds slice = 10s) {
  CollectiveEngine::instance().start(
      lane,
      [&r, &suspended, slice, after = std::move(after)] {
        r.on_finish = CollectiveEngine::finish_lane();
        ++suspended;
        while (!CollectiveEngine::await(r, Clock::now() + slice)) {
        }
        if (after) after();
      },
      [&done] { ++done; });
}

TEST(CollectiveEngine, SuspendedTasksLetTheOthersOfTheirLaneRunAndResumeInAnyOrder) {
  CollectiveEngine& engine = CollectiveEngine::instance();
  const int lane = engine.pick_lane();
  constexpr int kTasks = 40;
  std::vector<std::shared_ptr<RequestState>> requests;
  for (int i = 0; i < kTasks; ++i) requests.push_back(request());
  std::atomic<int> suspended{0};
  std::atomic<int> done{0};
  std::mutex order_mu;
  std::vector<int> order;
  for (int i = 0; i < kTasks; ++i) {
    start_waiting_task(lane, *requests[static_cast<size_t>(i)], suspended, done, [&, i] {
      std::lock_guard lock(order_mu);
      order.push_back(i);
    });
  }
  // Every task got to its wait although none of their requests has finished: one
  // lane holds them all.
  ASSERT_TRUE(reaches(suspended, kTasks));
  EXPECT_EQ(done.load(), 0);
  // Finished last to first, they end last to first.
  for (int i = kTasks - 1; i >= 0; --i) {
    requests[static_cast<size_t>(i)]->complete(-1, 0);
    ASSERT_TRUE(reaches(done, kTasks - i)) << "task " << i << " did not resume when its request finished";
  }
  std::lock_guard lock(order_mu);
  for (int i = 0; i < kTasks; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], kTasks - 1 - i);
}

TEST(CollectiveEngine, AWaitEndsAtItsTimeWhenTheRequestDoesNotFinish) {
  CollectiveEngine& engine = CollectiveEngine::instance();
  auto r = request();
  std::atomic<int> done{0};
  std::atomic<bool> finished{true};
  std::atomic<int64_t> waited_ms{0};
  engine.start(
      engine.pick_lane(),
      [&] {
        r->on_finish = CollectiveEngine::finish_lane();
        const auto start = Clock::now();
        finished = CollectiveEngine::await(*r, start + 80ms);
        waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      },
      [&] { ++done; });
  ASSERT_TRUE(reaches(done, 1));
  EXPECT_FALSE(finished.load());
  EXPECT_GE(waited_ms.load(), 80);
  EXPECT_LT(waited_ms.load(), 2000);
}

// The CPU time of this process's thread named `name` (the lane's), or -1 when none
// has it. The lane's own clock, not the process's: other threads of the test binary
// (OpenBLAS's server threads spin for a while after the library loads) are not the
// lane's doing.
double thread_cpu_seconds(std::string_view name) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (!std::getline(comm, line) || line != name) continue;
    const auto tid = static_cast<clockid_t>(std::stol(task.path().filename().string()));
    // The kernel's clock id for one thread's CPU time (MAKE_THREAD_CPUCLOCK with
    // CPUCLOCK_SCHED), as glibc's pthread_getcpuclockid builds it from a thread id.
    const clockid_t clock = (~tid << 3) | 6;
    timespec t{};
    if (::clock_gettime(clock, &t) != 0) return -1;
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  }
  return -1;
}

TEST(CollectiveEngine, ALaneWithOnlySuspendedTasksTakesNoCpu) {
  CollectiveEngine& engine = CollectiveEngine::instance();
  auto r = request();
  std::atomic<int> suspended{0};
  std::atomic<int> done{0};
  start_waiting_task(engine.pick_lane(), *r, suspended, done);
  ASSERT_TRUE(reaches(suspended, 1));
  // One lane (THD_COLLECTIVE_THREADS defaults to 1): its thread is the only one so named.
  const double before = thread_cpu_seconds("thd-collectives");
  ASSERT_GE(before, 0) << "no thread named thd-collectives";
  std::this_thread::sleep_for(500ms);
  const double used = thread_cpu_seconds("thd-collectives") - before;
  EXPECT_LT(used, 0.02) << "the lane used " << used << " s of CPU in 0.5 s with one task waiting";
  r->complete(-1, 0);
  EXPECT_TRUE(reaches(done, 1));
}

// A transport that only counts the external waits it is told of.
class CountingTransport final : public Transport {
 public:
  CountingTransport() : Transport(0, 1) {}
  std::string_view name() const noexcept override { return "counting"; }
  void post_send(std::span<const uint8_t>, int, const Envelope&, const std::shared_ptr<RequestState>&) override {}
  void post_recv(std::span<uint8_t>, int, const Envelope&, const std::shared_ptr<RequestState>&) override {}
  void cancel(const std::shared_ptr<RequestState>&, std::exception_ptr) override {}
  std::exception_ptr peer_error(int) const override { return nullptr; }
  void begin_external_wait() noexcept override { ++begun; }
  void end_external_wait() noexcept override { ++ended; }
  std::atomic<int> begun{0};
  std::atomic<int> ended{0};
};

TEST(CollectiveEngine, ASleepingLaneHasTheTransportItsTasksWaitOnServeThem) {
  CountingTransport transport;
  CollectiveEngine& engine = CollectiveEngine::instance();
  const int lane = engine.pick_lane();
  std::vector<std::shared_ptr<RequestState>> requests;
  for (int i = 0; i < 2; ++i) requests.push_back(std::make_shared<RequestState>("test", net::Deadline::max(), &transport, 0));
  std::atomic<int> suspended{0};
  std::atomic<int> done{0};
  for (int i = 0; i < 2; ++i) start_waiting_task(lane, *requests[static_cast<size_t>(i)], suspended, done);
  ASSERT_TRUE(reaches(suspended, 2));
  // Asleep with both tasks waiting on the one transport: told once, and not yet
  // told the wait is over.
  const auto until = Clock::now() + 10s;
  while (transport.begun.load() - transport.ended.load() != 1 && Clock::now() < until) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(transport.begun.load() - transport.ended.load(), 1);
  requests[0]->complete(-1, 0);
  ASSERT_TRUE(reaches(done, 1));
  requests[1]->complete(-1, 0);
  ASSERT_TRUE(reaches(done, 2));
  // Every wait the lane began, it ended, before the tasks that held the transport went.
  EXPECT_EQ(transport.begun.load(), transport.ended.load());
  EXPECT_GE(transport.begun.load(), 1);
}

TEST(CollectiveQueue, RunsItsTasksOneAtATimeInIssueOrder) {
  std::vector<std::shared_ptr<RequestState>> requests;
  constexpr int kTasks = 8;
  for (int i = 0; i < kTasks; ++i) requests.push_back(request());
  std::atomic<int> started{0};
  std::atomic<int> finished{0};
  std::mutex order_mu;
  std::vector<int> order;
  {
    CollectiveQueue queue;
    for (int i = 0; i < kTasks; ++i) {
      queue.submit([&, i] {
        // The one before has finished when this one starts.
        if (finished.load() != i) ADD_FAILURE() << "task " << i << " started with " << finished.load() << " done";
        ++started;
        RequestState& r = *requests[static_cast<size_t>(i)];
        r.on_finish = CollectiveEngine::finish_lane();
        while (!CollectiveEngine::await(r, net::Deadline::max())) {
        }
        {
          std::lock_guard lock(order_mu);
          order.push_back(i);
        }
        ++finished;
      });
    }
    // Finishing a later task's request first does not let it jump the queue.
    for (int i = kTasks - 1; i >= 0; --i) requests[static_cast<size_t>(i)]->complete(-1, 0);
    // The destructor waits for every task.
  }
  EXPECT_EQ(finished.load(), kTasks);
  for (int i = 0; i < kTasks; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
}

TEST(CollectiveEngine, AChildOfForkRunsTasksOnThreadsOfItsOwn) {
  CollectiveEngine& engine = CollectiveEngine::instance();
  std::atomic<int> done{0};
  engine.start(engine.pick_lane(), [] {}, [&] { ++done; });
  ASSERT_TRUE(reaches(done, 1));  // the parent's lane has its thread
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child has none of the parent's lane threads: its tasks run all the same.
    std::atomic<int> child_done{0};
    CollectiveEngine& mine = CollectiveEngine::instance();
    mine.start(mine.pick_lane(), [] {}, [&] { ++child_done; });
    ::_exit(reaches(child_done, 1, 5s) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's task did not run (status " << status
                                                             << ")";
}

TEST(CollectiveEngine, ThreadsSettingIsCheckedAndNamed) {
  EXPECT_EQ(collective_threads_from(std::nullopt), 1);
  EXPECT_EQ(collective_threads_from(""), 1);
  EXPECT_EQ(collective_threads_from("4"), 4);
  EXPECT_EQ(collective_threads_from("64"), 64);
  for (const char* bad : {"0", "65", "-1", "two", "2x", " 2"}) {
    THD_EXPECT_THROW_MSG((void)collective_threads_from(bad), ValueError, "THD_COLLECTIVE_THREADS");
  }
}

}  // namespace
}  // namespace thd::detail
