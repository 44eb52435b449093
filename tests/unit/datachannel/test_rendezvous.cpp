#include <gtest/gtest.h>

#include <stdlib.h>

#include <future>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include <thd/store.h>

#include <thd/config.h>

#include "datachannel/backend_choice.h"
#include "datachannel/backends.h"
#include "datachannel/test_util.h"

namespace thd {
namespace {

using namespace std::chrono_literals;

RendezvousOptions opts(std::string url, int rank, int world, std::chrono::milliseconds timeout = test::kLong) {
  return RendezvousOptions{.init_method = std::move(url),
                           .rank = rank,
                           .world_size = world,
                           .timeout = timeout,
                           .token = test::kToken};
}

// Runs rendezvous for the given ranks on threads; results in rank order.
std::vector<RendezvousResult> run_ranks(const std::string& url, int world, std::vector<int> ranks) {
  std::vector<std::future<RendezvousResult>> futures;
  for (int r : ranks) {
    futures.push_back(std::async(std::launch::async, [=] { return rendezvous(opts(url, r, world)); }));
  }
  std::vector<RendezvousResult> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

void expect_connected(std::vector<RendezvousResult>& results, int world) {
  ASSERT_EQ(results.size(), static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(results[r].rank, r);
    EXPECT_EQ(results[r].world_size, world);
    ASSERT_NE(results[r].store, nullptr);
    EXPECT_EQ(results[r].store->timeout(), test::kLong);
  }
  // One store: what one rank writes, every other reads.
  results[world - 1].store->set("hello", "from the last rank");
  for (auto& res : results) EXPECT_EQ(res.store->get_string("hello"), "from the last rank");
  for (auto& res : results) res.store->add("count", 1);
  EXPECT_EQ(results[0].store->add("count", 0), world);
}

TEST(Rendezvous, TcpRanksFindEachOther) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(test::free_port());
  auto results = run_ranks(url, 3, {0, 1, 2});
  EXPECT_NE(dynamic_cast<TCPStore*>(results[0].store.get()), nullptr);
  EXPECT_TRUE(dynamic_cast<TCPStore&>(*results[0].store).is_server());
  EXPECT_FALSE(dynamic_cast<TCPStore&>(*results[1].store).is_server());
  expect_connected(results, 3);
}

TEST(Rendezvous, FileRanksFindEachOther) {
  test::TempDir dir;
  auto results = run_ranks("file://" + dir.file("rdzv"), 3, {0, 1, 2});
  EXPECT_NE(dynamic_cast<FileStore*>(results[0].store.get()), nullptr);
  expect_connected(results, 3);
}

TEST(Rendezvous, EnvRanksFindEachOtherAsProcesses) {
  const uint16_t port = test::free_port();
  constexpr int kWorld = 3;
  test::Children children;
  for (int r = 0; r < kWorld; ++r) {
    children.spawn([=] {
      // The environment a launcher gives each process, set in the child only.
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(kWorld).c_str(), 1);
      ::setenv("THD_AUTH_TOKEN", test::kToken, 1);
      RendezvousResult res = rendezvous("env://", -1, -1, test::kLong);
      if (res.rank != r || res.world_size != kWorld) return 2;
      res.store->add("arrived", 1);
      res.store->wait({"rendezvous/rank/0"});
      // Rank 0 hosts the store: it leaves last.
      res.store->add("done", 1);
      if (r == 0) {
        while (res.store->add("done", 0) < kWorld) std::this_thread::sleep_for(1ms);
        if (res.store->add("arrived", 0) != kWorld) return 3;
      }
      return 0;
    });
  }
  EXPECT_EQ(children.wait_all(), std::vector<int>(kWorld, 0));
}

// Runs `body` in a child with exactly `env` among the rendezvous variables, and
// returns its exit code.
int in_child_env(const std::vector<std::pair<const char*, const char*>>& env, const std::function<int()>& body) {
  test::Children children;
  children.spawn([&] {
    for (const char* v : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"}) {
      ::unsetenv(v);
    }
    for (auto [name, value] : env) ::setenv(name, value, 1);
    return body();
  });
  return children.wait_all().at(0);
}

// 0 if `fn` throws ValueError mentioning every needle.
int expect_value_error(const std::function<void()>& fn, std::vector<std::string> needles) {
  try {
    fn();
  } catch (const ValueError& e) {
    for (const auto& n : needles) {
      if (std::string(e.what()).find(n) == std::string::npos) {
        std::fprintf(stderr, "message '%s' does not mention '%s'\n", e.what(), n.c_str());
        return 2;
      }
    }
    return 0;
  }
  return 1;
}

TEST(Rendezvous, EnvNamesEveryMissingVariable) {
  EXPECT_EQ(in_child_env({},
                         [] {
                           return expect_value_error([] { rendezvous("env://", -1, -1, 1s); },
                                                     {"MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE"});
                         }),
            0);
  // Arguments stand in for RANK and WORLD_SIZE.
  EXPECT_EQ(in_child_env({{"MASTER_ADDR", "127.0.0.1"}},
                         [] { return expect_value_error([] { rendezvous("env://", 0, 1, 1s); }, {"MASTER_PORT set"}); }),
            0);
}

TEST(Rendezvous, EnvTakesRankAndSizeFromSlurm) {
  // srun sets SLURM_PROCID/SLURM_NTASKS: they stand in for RANK/WORLD_SIZE, and an
  // argument that disagrees is named against them.
  const std::vector<std::pair<const char*, const char*>> env = {
      {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}};
  EXPECT_EQ(in_child_env(env,
                         [] {
                           return expect_value_error([] { rendezvous("env://", 2, -1, 1s); },
                                                     {"rank argument 2 conflicts with SLURM_PROCID=1"});
                         }),
            0);
}

TEST(Rendezvous, MpiSchemeTakesNothingAfterIt) {
  EXPECT_EQ(in_child_env({},
                         [] {
                           return expect_value_error([] { rendezvous("mpi://host:1", -1, -1, 1s); },
                                                     {"mpi://host:1", "mpi"});
                         }),
            0);
}

TEST(Rendezvous, EnvArgumentsMustAgreeWithTheEnvironment) {
  const std::vector<std::pair<const char*, const char*>> env = {
      {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "1"}, {"WORLD_SIZE", "4"}};
  EXPECT_EQ(in_child_env(env,
                         [] {
                           return expect_value_error([] { rendezvous("env://", 2, -1, 1s); },
                                                     {"rank argument 2 conflicts with RANK=1"});
                         }),
            0);
  EXPECT_EQ(in_child_env(env,
                         [] {
                           return expect_value_error([] { rendezvous("env://", 1, 8, 1s); },
                                                     {"world_size argument 8 conflicts with WORLD_SIZE=4"});
                         }),
            0);
  EXPECT_EQ(in_child_env({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "http"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}},
                         [] {
                           return expect_value_error([] { rendezvous("env://", -1, -1, 1s); },
                                                     {"MASTER_PORT: port 'http'"});
                         }),
            0);
  EXPECT_EQ(in_child_env({{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"}, {"RANK", "one"}, {"WORLD_SIZE", "1"}},
                         [] { return expect_value_error([] { rendezvous("env://", -1, -1, 1s); }, {"RANK='one'"}); }),
            0);
}

TEST(Rendezvous, BadUrlsAreValueErrors) {
  THD_EXPECT_THROW_MSG(rendezvous("udp://host:1", 0, 1), ValueError, "unknown init_method scheme 'udp://'");
  THD_EXPECT_THROW_MSG(rendezvous("127.0.0.1:29500", 0, 1), ValueError, "is not a URL");
  THD_EXPECT_THROW_MSG(rendezvous("tcp://127.0.0.1", 0, 1), ValueError, "has no port");
  THD_EXPECT_THROW_MSG(rendezvous("tcp://127.0.0.1:", 0, 1), ValueError, "has no port");
  THD_EXPECT_THROW_MSG(rendezvous("tcp://:29500", 0, 1), ValueError, "has no host");
  THD_EXPECT_THROW_MSG(rendezvous("tcp://127.0.0.1:99999", 0, 1), ValueError, "port '99999'");
  THD_EXPECT_THROW_MSG(rendezvous("tcp://127.0.0.1:0", 0, 1), ValueError, "port '0'");
  THD_EXPECT_THROW_MSG(rendezvous("tcp://127.0.0.1:29500/path", 0, 1), ValueError, "only host:port");
  THD_EXPECT_THROW_MSG(rendezvous("tcp://::1:29500", 0, 1), ValueError, "in brackets");
  THD_EXPECT_THROW_MSG(rendezvous("file://relative/path", 0, 1), ValueError, "absolute path");
  THD_EXPECT_THROW_MSG(rendezvous("env://extra", 0, 1), ValueError, "takes nothing after it");
}

TEST(Rendezvous, RankAndWorldSizeAreChecked) {
  THD_EXPECT_THROW_MSG(rendezvous("tcp://127.0.0.1:29500", 3, 3), ValueError, "rank in [0, 3)");
  THD_EXPECT_THROW_MSG(rendezvous("tcp://127.0.0.1:29500", -1, 3), ValueError, "got -1");
  THD_EXPECT_THROW_MSG(rendezvous("tcp://127.0.0.1:29500", 0, -1), ValueError, "world_size >= 1");
  THD_EXPECT_THROW_MSG(rendezvous("file:///tmp/x", 0, 0), ValueError, "world_size >= 1");
  THD_EXPECT_THROW_MSG(rendezvous("tcp://127.0.0.1:29500", 0, 1, -5ms), ValueError, "timeout must be >= 0");
}

TEST(Rendezvous, ARankThatNeverArrivesIsNamed) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(test::free_port());
  std::vector<std::future<void>> ranks;
  for (int r : {0, 1, 3}) {
    ranks.push_back(std::async(std::launch::async, [=] {
      try {
        // Rank 0 hosts the store, so it gives up last: the others still need it to
        // find out who is missing.
        rendezvous(opts(url, r, 5, r == 0 ? 800ms : 300ms));
        ADD_FAILURE() << "rank " << r << " completed a rendezvous missing two ranks";
      } catch (const TimeoutError& e) {
        EXPECT_NE(std::string(e.what()).find("ranks 2, 4 never arrived"), std::string::npos) << e.what();
        EXPECT_EQ(e.context().rank, r);
      }
    }));
  }
  for (auto& f : ranks) f.get();
}

TEST(Rendezvous, WorkersWaitForALateRankZero) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(test::free_port());
  auto worker = std::async(std::launch::async, [&] { return rendezvous(opts(url, 1, 2)); });
  std::this_thread::sleep_for(200ms);
  auto master = rendezvous(opts(url, 0, 2));
  EXPECT_EQ(worker.get().rank, 1);
}

TEST(Rendezvous, NoServerIsATimeoutNamingTheRankAndAddress) {
  const uint16_t port = test::free_port();
  const std::string url = "tcp://127.0.0.1:" + std::to_string(port);
  try {
    rendezvous(opts(url, 1, 2, 200ms));
    ADD_FAILURE() << "connected to nothing";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reach the store at 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << e.what();
    EXPECT_EQ(e.context().rank, 1);
  }
}

TEST(Rendezvous, ARankClaimedTwiceIsRefused) {
  test::TempDir dir;
  const std::string url = "file://" + dir.file("rdzv");
  auto first = rendezvous(opts(url, 0, 1));  // world of one: completes at once
  THD_EXPECT_THROW_MSG(rendezvous(opts(url, 0, 1)), ValueError, "rank 0 was claimed twice");
}

TEST(Rendezvous, RanksMustAgreeOnTheWorldSize) {
  test::TempDir dir;
  const std::string url = "file://" + dir.file("rdzv");
  // Rank 0 waits long enough to still be registered when rank 1 looks, however
  // slowly a loaded host runs the two.
  auto a = std::async(std::launch::async, [&] {
    try {
      rendezvous(opts(url, 0, 2, 2s));
    } catch (const TimeoutError&) {
      // rank 1 of this world never comes
    }
  });
  // Rank 1 comes once rank 0 has registered its world_size.
  FileStore(dir.file("rdzv")).wait({"rendezvous/world_size"}, 10s);
  THD_EXPECT_THROW_MSG(rendezvous(opts(url, 1, 3, 2s)), ValueError,
                   "started with world_size 3, but another rank registered world_size 2");
  a.get();
}

TEST(Rendezvous, WrongTokenIsAnAuthErrorForTheWorker) {
  const std::string url = "tcp://127.0.0.1:" + std::to_string(test::free_port());
  auto master = std::async(std::launch::async, [&] {
    try {
      rendezvous(opts(url, 0, 2, 600ms));
    } catch (const TimeoutError&) {
      // the worker was refused, so rank 1 never arrives
    }
  });
  std::this_thread::sleep_for(100ms);
  RendezvousOptions o = opts(url, 1, 2, 2s);
  o.token = "wrong";
  THD_EXPECT_THROW_MSG(rendezvous(o), AuthError, "refused this process's auth token");
  master.get();
}

// Which launch's ranks a rendezvous takes (master/spmd_launch.h relies on it):
// an environment given to the function, not setenv() on the test process.
net::EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(Rendezvous, NamesTheLauncherWhoseRanksItTakes) {
  RendezvousOptions o;
  const auto slurm_task = env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"MASTER_ADDR", "127.0.0.1"}});
  EXPECT_EQ(detail::rendezvous_launcher(o, slurm_task), "srun");
  EXPECT_EQ(detail::rendezvous_launcher(o, env_of({{"RANK", "0"}, {"SLURM_PROCID", "0"}})), "")
      << "thdrun's RANK comes first";
  EXPECT_EQ(detail::rendezvous_launcher(o, env_of({{"RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"}})), "");
  RendezvousOptions given_rank = o;
  given_rank.rank = 0;
  EXPECT_EQ(detail::rendezvous_launcher(given_rank, slurm_task), "") << "a rank the program chose";
  RendezvousOptions tcp = o;
  tcp.init_method = "tcp://127.0.0.1:29500";
  EXPECT_EQ(detail::rendezvous_launcher(tcp, slurm_task), "");
  if (THD_WITH_MPI) {
    RendezvousOptions mpi = o;
    mpi.init_method = "mpi://";
    EXPECT_EQ(detail::rendezvous_launcher(mpi, env_of({})), "mpirun");
  }
}

}  // namespace
}  // namespace thd
