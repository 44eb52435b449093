// The Store dying (its host SIGKILLed) or stalling (SIGSTOPped) while the ranks of
// a master-worker job wait in rendezvous: every rank that waits ends with an
// error that names the store's address, within the bound — at once for a dead
// store, by its timeout for a stalled one — and none is left running.
#include <gtest/gtest.h>

#include <signal.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <thd/store.h>

#include "fault_checks.h"
#include "roles.h"
#include "test_util.h"

namespace thd::test {
namespace {

using namespace std::chrono_literals;

// Ranks 0..started-1 of a job of `world` ranks (so nobody gets past rendezvous),
// each the worker role: rank 0 hosts the store at 127.0.0.1:port.
struct WaitingRanks {
  WaitingRanks(int started, int world, milliseconds timeout) : port(free_port()) {
    for (int rank = 0; rank < started; ++rank) {
      EnvChanges env = {{"MASTER_ADDR", "127.0.0.1"},     {"MASTER_PORT", std::to_string(port)},
                        {"RANK", std::to_string(rank)},   {"WORLD_SIZE", std::to_string(world)},
                        {"THD_AUTH_TOKEN", kToken},       {"THD_BACKEND", "tcp"},
                        {"THD_HARDENING_TIMEOUT_MS", std::to_string(timeout.count())}};
      ranks.push_back(std::make_unique<TestProcess>(std::vector<std::string>{self_path(), kWorkerRole}, env));
    }
  }

  // True once every started rank has registered with the store.
  bool all_registered(milliseconds within) {
    TCPStore probe({.port = port, .timeout = within, .token = std::string(kToken)});
    std::vector<std::string> keys;
    for (size_t r = 0; r < ranks.size(); ++r) keys.push_back("rendezvous/rank/" + std::to_string(r));
    try {
      probe.wait(keys, within);
      return true;
    } catch (const TimeoutError&) {
      return false;
    }
  }

  std::string store() const { return "127.0.0.1:" + std::to_string(port); }

  uint16_t port;
  std::vector<std::unique_ptr<TestProcess>> ranks;
};

// Ranks 1.. end with status 2 (init_master_worker threw) and an error naming the
// store, each within `bound` of `since`.
void expect_ranks_fail_naming_the_store(WaitingRanks& job, Clock::time_point since, milliseconds bound,
                                        const std::string& what) {
  for (size_t rank = 1; rank < job.ranks.size(); ++rank) {
    TestProcess& p = *job.ranks[rank];
    const auto left = std::chrono::duration_cast<milliseconds>(since + bound - Clock::now());
    const int status = p.wait(std::max(left, 1ms));
    report_timing(what + ", rank " + std::to_string(rank), std::chrono::duration_cast<milliseconds>(Clock::now() - since));
    EXPECT_EQ(status, 2) << "rank " << rank << " (-1: still waiting " << bound.count() << " ms after the fault):\n"
                         << p.output();
    const std::string out = p.output();
    report_message(what + ", rank " + std::to_string(rank), out.substr(0, out.find('\n')));
    EXPECT_NE(out.find(job.store()), std::string::npos) << "rank " << rank << " does not name the store:\n" << out;
    EXPECT_NE(out.find("rendezvous"), std::string::npos) << "rank " << rank << ":\n" << out;
  }
}

TEST(StoreDeath, RanksWaitingInRendezvousFailAtOnceNamingTheStore) {
  constexpr milliseconds kTimeout{10000};
  WaitingRanks job(3, 4, kTimeout);
  ASSERT_TRUE(job.all_registered(10000ms)) << job.ranks[0]->output();
  job.ranks[0]->signal(SIGKILL);
  const auto killed = Clock::now();
  expect_ranks_fail_naming_the_store(job, killed, kNoticeWithin, "store killed");
}

TEST(StoreDeath, RanksWaitingOnAStalledStoreTimeOutNamingIt) {
  constexpr milliseconds kTimeout{1500};
  WaitingRanks job(3, 4, kTimeout);
  ASSERT_TRUE(job.all_registered(10000ms)) << job.ranks[0]->output();
  job.ranks[0]->signal(SIGSTOP);
  const auto stopped = Clock::now();
  // A rank waits out its rendezvous timeout (and a tenth more for the store's
  // answer), then gives the stalled store at most a second more to name the
  // missing ranks.
  expect_ranks_fail_naming_the_store(job, stopped, 2 * kTimeout + 1000ms, "store stopped");
  job.ranks[0]->signal(SIGKILL);
}

}  // namespace
}  // namespace thd::test
