// A master-worker job under thdrun loses a worker mid-job: thdrun leaves the
// master running (its default --on-rank-failure is master-decides for such a job),
// the master gets thd::WorkerLost, finishes its work on the surviving nodes and
// exits 0, and so does thdrun. That an SPMD job still stops at its first failure,
// and the policy's finer cases, are tests/tools' (test_thdrun_rank_failure.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "pool_process.h"
#include "roles.h"
#include "test_util.h"
#include "worker_job.h"

namespace thd::test {
namespace {

using namespace std::chrono_literals;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ThdrunWorkerLost, MasterFinishesOnTheSurvivingNodes) {
  TempDir dir;
  const auto started = std::chrono::steady_clock::now();
  TestProcess job({pool_thdrun_path(), "-n", "4", "--tag-output", self_path(), kMasterRole, "lose-worker"},
                  {{"THD_BACKEND", "tcp"},
                   {"THD_HARDENING_RELEASE", dir.file("release")},
                   {"THD_HARDENING_TIMEOUT_MS", "20000"},
                   {"TMPDIR", dir.path().string()}});
  const int status = job.wait(45000ms);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  const std::string out = job.output();
  EXPECT_EQ(status, 0) << out;
  EXPECT_TRUE(contains(out, "[rank 0] master caught WorkerLost")) << out;
  EXPECT_TRUE(contains(out, "[rank 0] master finished without node 1")) << out;
  EXPECT_TRUE(contains(out, "thdrun: rank 2 (pid ")) << out;
  EXPECT_TRUE(contains(out, "was killed by signal SIGKILL; the job goes on")) << out;
  EXPECT_FALSE(contains(out, "stopping the other ranks")) << out;
  // thdrun's private directory (token, job mode) is gone with it.
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_FALSE(entry.path().filename().string().starts_with("thdrun-")) << entry.path();
  }
  std::fprintf(stderr, "[ figure ] thdrun -n 4 master-worker job, worker killed mid-job: status %d after %lld ms\n",
               status, static_cast<long long>(took.count()));
}

}  // namespace
}  // namespace thd::test
