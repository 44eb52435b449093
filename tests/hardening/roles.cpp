#include "roles.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <thd/datachannel.h>
#include <thd/distributed.h>
#include <thd/store.h>
#include <thd/stream.h>

#include "busy_work.h"

namespace thd::test {
namespace {

using std::chrono::milliseconds;

// Printed with write(2): nothing waits in a stdio buffer when the test reads the
// output, or when the process is killed right after.
void say(const std::string& line) {
  const std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(1, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

MasterWorkerOptions role_options(const std::string& url) {
  MasterWorkerOptions o;
  o.timeout = milliseconds(std::atoi(env_or("THD_HARDENING_TIMEOUT_MS", "10000").c_str()));
  if (!url.empty()) o.init_method = url;
  return o;
}

int run_worker() {
  try {
    init_master_worker(role_options(""));  // exits the process when the session ends
    std::fprintf(stderr, "hardening worker (pid %d): init_master_worker returned on a worker rank\n", ::getpid());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hardening worker (pid %d): %s\n", ::getpid(), e.what());
    return 2;
  }
}

// Tensors held past the end of main: their handles outlive the session that the
// exit hook ends, as a program's globals would.
std::vector<DistributedTensor> g_kept;

// A little work on every node, queued and not waited for.
void queue_some_work() {
  for (int node = 0; node < num_nodes(); ++node) {
    NodeScope on(node);
    g_kept.push_back(queue_matmuls(20, 64));
  }
}

[[noreturn]] void exit_from_inside_a_call() { std::exit(0); }

// Waits (at most 20 s) for the THD_HARDENING_RELEASE file; false when it did not come.
bool wait_for_release() {
  const std::string release = env_or("THD_HARDENING_RELEASE", "");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!release.empty() && !std::filesystem::exists(release)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::fprintf(stderr, "%s did not appear within 20 s\n", release.c_str());
      return false;
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// Seconds of work on a side stream of every node; returns once every node runs it.
int busy() {
  std::vector<Stream> side;
  std::vector<uint64_t> base;
  for (const NodeStats& s : stats()) base.push_back(s.ops_executed);
  for (int node = 0; node < num_nodes(); ++node) {
    side.push_back(Stream::create(node));
    StreamScope in(side.back());
    g_kept.push_back(DistributedTensor::ones({int64_t{8} << 20}));  // 32 MiB held
    g_kept.push_back(queue_matmuls(400));
  }
  std::vector<NodeStats> seen;
  const bool inside = poll_stats(
      [&](const std::vector<NodeStats>& now) {
        seen = now;
        for (size_t n = 0; n < now.size(); ++n) {
          if (now[n].ops_executed < base[n] + 3 || queued_on(now[n], side[n]) < 400) return false;
        }
        return true;
      },
      milliseconds(20000));
  if (!inside) {
    std::fprintf(stderr, "master: the nodes did not start the queued work within 20 s\n");
    return 6;
  }
  std::string line = "master inside: ops queued";
  for (size_t n = 0; n < seen.size(); ++n) line += " " + std::to_string(queued_on(seen[n], side[n]));
  say(line);
  std::this_thread::sleep_for(std::chrono::minutes(1));
  return 5;  // the test should have killed it by now
}

// Seconds of work on the default stream of every node, flushed, not waited for.
int busy_default() {
  for (int node = 0; node < num_nodes(); ++node) {
    NodeScope on(node);
    g_kept.push_back(queue_matmuls(400));
  }
  std::this_thread::sleep_for(milliseconds(50));  // the background flush sends the last batch
  say("master queued");
  std::this_thread::sleep_for(std::chrono::minutes(1));
  return 5;  // the test should have killed it by now
}

// Under thdrun: something of everything (a copy, a collective, streams) so the
// logs have something to say; then waits until the test has looked at the job.
int audit() {
  say("master ready token_file=" + env_or("THD_AUTH_TOKEN_FILE", "-") + " port=" + env_or("MASTER_PORT", "-") +
      " pid=" + std::to_string(::getpid()));
  std::vector<DistributedTensor> grads;
  for (int node = 0; node < num_nodes(); ++node) {
    NodeScope on(node);
    grads.push_back(DistributedTensor::ones({1000}));
  }
  all_reduce(grads);
  const float copied = grads.front().to_node(num_nodes() - 1).sum().item<float>();
  if (copied != 1000.0f * static_cast<float>(num_nodes())) {
    std::fprintf(stderr, "master: the all_reduce and copy gave %g\n", copied);
    return 3;
  }
  if (!wait_for_release()) return 4;
  shutdown();
  return 0;
}

// The rank of node 1 in lose-worker: it dies by its own hand once the master
// has put the release file in place.
constexpr int kLostRank = 2;
constexpr int kLostNode = kLostRank - 1;

// Started before init_master_worker on the doomed rank, which never returns from it.
void die_when_released(const std::string& release) {
  std::thread([release] {
    while (!std::filesystem::exists(release)) std::this_thread::sleep_for(milliseconds(5));
    ::kill(::getpid(), SIGKILL);
  }).detach();
}

float sum_on(const DistributedTensor& t) { return t.sum().item<float>(); }

int lose_worker() {
  if (num_nodes() != 3) {
    std::fprintf(stderr, "master: lose-worker needs 3 nodes (thdrun -n 4), got %d\n", num_nodes());
    return 2;
  }
  // Node n holds 1000 elements of n + 1.
  std::vector<DistributedTensor> held;
  for (int node = 0; node < 3; ++node) {
    NodeScope on(node);
    held.push_back(DistributedTensor::ones({1000}) * static_cast<float>(node + 1));
  }
  for (int node = 0; node < 3; ++node) {
    if (sum_on(held[static_cast<size_t>(node)]) != 1000.0f * static_cast<float>(node + 1)) {
      std::fprintf(stderr, "master: node %d holds the wrong values before the loss\n", node);
      return 3;
    }
  }
  // The release file makes node 1 kill itself.
  const std::string release = env_or("THD_HARDENING_RELEASE", "");
  std::FILE* f = release.empty() ? nullptr : std::fopen(release.c_str(), "w");
  if (f == nullptr || std::fclose(f) != 0) {
    std::fprintf(stderr, "master: cannot create the release file '%s'\n", release.c_str());
    return 2;
  }
  bool lost = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!lost && std::chrono::steady_clock::now() < deadline) {
    try {
      NodeScope on(kLostNode);
      (void)sum_on(held[static_cast<size_t>(kLostNode)] + 1.0f);
      std::this_thread::sleep_for(milliseconds(10));
    } catch (const WorkerLost& e) {
      say(std::string("master caught WorkerLost: ") + e.what());
      lost = true;
    }
  }
  if (!lost) {
    std::fprintf(stderr, "master: no WorkerLost for node %d within 20 s\n", kLostNode);
    return 3;
  }
  // The survivors' tensors are intact, they compute, and they exchange data.
  DistributedTensor on2 = held[0].to_node(2) + held[2];  // 1 + 3 on node 2
  DistributedTensor on0;
  {
    NodeScope on(0);
    on0 = held[0] * 5.0f;
  }
  if (sum_on(on2) != 4000.0f || sum_on(on0) != 5000.0f || sum_on(held[2]) != 3000.0f) {
    std::fprintf(stderr, "master: wrong values on the surviving nodes: %g %g %g\n", sum_on(on2), sum_on(on0),
                 sum_on(held[2]));
    return 3;
  }
  say("master finished without node " + std::to_string(kLostNode));
  try {
    shutdown();
  } catch (const WorkerLost&) {
    // shutdown() reports the lost node again: known, and handled above.
  }
  return 0;
}

int mesh() {
  try {
    RendezvousResult joined = rendezvous("env://", -1, -1, std::chrono::seconds(20));
    if (joined.rank == 2 && !wait_for_release()) return 4;
    DataChannelOptions o;  // the default bind host
    o.store = joined.store;
    o.rank = joined.rank;
    o.world_size = joined.world_size;
    o.timeout = std::chrono::seconds(20);
    std::shared_ptr<DataChannel> dc = DataChannel::create("tcp", o);
    dc->barrier();
    // Rank 0 hosts the store: it stays until every rank is done with it.
    joined.store->set("done/" + std::to_string(joined.rank), "1");
    if (joined.rank == 0) {
      std::vector<std::string> keys;
      for (int r = 0; r < joined.world_size; ++r) keys.push_back("done/" + std::to_string(r));
      joined.store->wait(keys, std::chrono::seconds(20));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mesh rank: %s\n", e.what());
    return 3;
  }
}

int run_master(const std::string& scenario, const std::string& url) {
  bool known = false;
  for (const char* s : kScenarios) known = known || scenario == s;
  if (!known) {
    std::fprintf(stderr, "unknown master scenario '%s'\n", scenario.c_str());
    return 2;
  }
  if (scenario == "mesh") return mesh();
  if (scenario == "lose-worker" && env_or("RANK", "") == std::to_string(kLostRank)) {
    die_when_released(env_or("THD_HARDENING_RELEASE", ""));
  }
  try {
    init_master_worker(role_options(url));  // ranks > 0 of an SPMD launch serve and exit here
  } catch (const std::exception& e) {
    std::fprintf(stderr, "master: init_master_worker: %s\n", e.what());
    return 4;
  }
  try {
    if (scenario == "busy") return busy();
    if (scenario == "busy-default") return busy_default();
    if (scenario == "audit") return audit();
    if (scenario == "lose-worker") return lose_worker();
    queue_some_work();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "master: %s\n", e.what());
    return 4;
  }
  say("master ready");
  if (scenario == "exit") exit_from_inside_a_call();
  if (scenario == "throw") {
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);  // std::terminate aborts: no core file
    throw std::runtime_error("an exception nobody catches, on purpose");
  }
  return 0;  // "return": main returns with the session still open
}

}  // namespace

std::optional<int> run_role_if_asked(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], kWorkerRole) == 0) return run_worker();
    if (std::strcmp(argv[i], kListenerRole) == 0) return run_listener_role(i + 1 < argc ? argv[i + 1] : "");
    if (std::strcmp(argv[i], kMasterRole) == 0) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a scenario\n", kMasterRole);
        return 2;
      }
      return run_master(argv[i + 1], i + 2 < argc ? argv[i + 2] : "");
    }
  }
  return std::nullopt;
}

}  // namespace thd::test
