// A master that ends without thd::shutdown() — main returns, std::exit, an
// exception nobody catches, SIGKILL with seconds of work queued — leaves no worker
// process behind: every worker has exited within a bound. The master and its
// workers are processes of this binary (roles.h), all of them children of the test,
// so nothing but thd itself ends the workers.
#include <gtest/gtest.h>

#include <signal.h>

#include <unistd.h>

#include <memory>
#include <sstream>
#include <thread>
#include <string>
#include <vector>

#include "fault_checks.h"
#include "proc_audit.h"
#include "roles.h"
#include "test_util.h"

namespace thd::test {
namespace {

using namespace std::chrono_literals;

// How long the workers may take to notice that their master has gone.
constexpr milliseconds kWorkersGoneWithin{3000};

// Rank 0 (the master, hosting the store) and `workers` worker ranks, each running
// the master scenario `scenario`: the workers serve from inside init_master_worker.
struct SpmdJob {
  SpmdJob(const std::string& scenario, int workers) {
    const std::string port = std::to_string(free_port());
    for (int rank = 0; rank <= workers; ++rank) {
      EnvChanges env = {{"MASTER_ADDR", "127.0.0.1"},         {"MASTER_PORT", port},
                        {"RANK", std::to_string(rank)},       {"WORLD_SIZE", std::to_string(workers + 1)},
                        {"THD_AUTH_TOKEN", kToken},           {"THD_BACKEND", "tcp"},
                        {"THD_HARDENING_TIMEOUT_MS", "10000"}};
      ranks.push_back(std::make_unique<TestProcess>(std::vector<std::string>{self_path(), kMasterRole, scenario}, env));
    }
  }
  TestProcess& master() { return *ranks.front(); }
  std::vector<std::unique_ptr<TestProcess>> ranks;
};

struct Ending {
  const char* scenario;
  int master_status;  // how the master process ends
  int worker_status;  // how its workers end: 0 after a Goodbye, 1 when the master was lost
};

void PrintTo(const Ending& e, std::ostream* os) { *os << e.scenario; }

class MasterExit : public ::testing::TestWithParam<Ending> {};

TEST_P(MasterExit, LeavesNoWorkerBehind) {
  const Ending ending = GetParam();
  SpmdJob job(ending.scenario, 2);
  ASSERT_TRUE(job.master().wait_for_output("master ready", 10000ms)) << job.master().output();
  const auto ready = Clock::now();
  EXPECT_EQ(job.master().wait(kWorkersGoneWithin), ending.master_status) << job.master().output();
  for (size_t rank = 1; rank < job.ranks.size(); ++rank) {
    TestProcess& worker = *job.ranks[rank];
    const auto left = std::chrono::duration_cast<milliseconds>(ready + kWorkersGoneWithin - Clock::now());
    const int status = worker.wait(std::max(left, 1ms));
    EXPECT_NE(status, -1) << "worker rank " << rank << " (pid " << worker.pid() << ") still runs "
                          << kWorkersGoneWithin.count() << " ms after its master ended:\n"
                          << worker.output();
    EXPECT_EQ(status, ending.worker_status) << "worker rank " << rank << ":\n" << worker.output();
  }
  report_timing("all workers gone", std::chrono::duration_cast<milliseconds>(Clock::now() - ready));
}

INSTANTIATE_TEST_SUITE_P(Endings, MasterExit,
                         ::testing::Values(Ending{"return", 0, 0}, Ending{"exit", 0, 0},
                                           Ending{"throw", 128 + SIGABRT, 1}),
                         [](const auto& info) { return std::string(info.param.scenario); });

// CPU time (user + system) of process `pid` so far.
milliseconds cpu_time(pid_t pid) {
  std::istringstream stat(read_proc_file(pid, "stat"));
  std::string field;
  // After "pid (comm)": fields 3.. ; utime and stime are fields 14 and 15.
  std::string all = stat.str();
  std::istringstream rest(all.substr(all.rfind(')') + 2));
  std::vector<std::string> fields;
  while (rest >> field) fields.push_back(field);
  if (fields.size() < 13) return milliseconds(0);
  const long ticks = std::stol(fields[11]) + std::stol(fields[12]);
  return milliseconds(ticks * 1000 / ::sysconf(_SC_CLK_TCK));
}

class MasterKilled : public ::testing::TestWithParam<const char*> {};

// The master queues seconds of work on every node and is SIGKILLed while the
// workers run it: they drop the rest and exit instead of running it for nobody.
TEST_P(MasterKilled, WorkersWithSecondsOfQueuedWorkExitPromptly) {
  const std::string scenario = GetParam();
  SpmdJob job(scenario, 2);
  if (scenario == "busy") {
    // The master itself saw every node inside the work (thd::stats).
    ASSERT_TRUE(job.master().wait_for_output("master inside", 20000ms)) << job.master().output();
  } else {
    // The default stream answers no statistics while it works: a worker is inside
    // the work once it has burnt CPU time on it.
    ASSERT_TRUE(job.master().wait_for_output("master queued", 20000ms)) << job.master().output();
    std::vector<milliseconds> before;
    for (size_t rank = 1; rank < job.ranks.size(); ++rank) before.push_back(cpu_time(job.ranks[rank]->pid()));
    bool inside = false;
    for (auto deadline = Clock::now() + 20000ms; !inside && Clock::now() < deadline;) {
      std::this_thread::sleep_for(5ms);
      inside = true;
      for (size_t rank = 1; rank < job.ranks.size(); ++rank) {
        inside = inside && cpu_time(job.ranks[rank]->pid()) >= before[rank - 1] + 200ms;
      }
    }
    ASSERT_TRUE(inside) << "the workers did not start the queued work";
  }
  job.master().signal(SIGKILL);
  const auto killed = Clock::now();
  EXPECT_EQ(job.master().wait(5000ms), 128 + SIGKILL);
  for (size_t rank = 1; rank < job.ranks.size(); ++rank) {
    TestProcess& worker = *job.ranks[rank];
    const auto left = std::chrono::duration_cast<milliseconds>(killed + kWorkersGoneWithin - Clock::now());
    const int status = worker.wait(std::max(left, 1ms));
    EXPECT_EQ(status, 1) << "worker rank " << rank << " (pid " << worker.pid()
                         << "): a worker whose master was killed should exit 1 within "
                         << kWorkersGoneWithin.count() << " ms, not run the work queued for it first:\n"
                         << worker.output();
  }
  report_timing("all workers gone", std::chrono::duration_cast<milliseconds>(Clock::now() - killed));
}

INSTANTIATE_TEST_SUITE_P(Streams, MasterKilled, ::testing::Values("busy", "busy-default"),
                         [](const auto& info) {
                           return std::string(info.param) == "busy" ? "SideStreams" : "DefaultStream";
                         });

}  // namespace
}  // namespace thd::test
