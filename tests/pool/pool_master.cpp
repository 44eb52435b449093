// thd_pool_master: a master of a worker pool for the pool tests, doing what its
// first argument says. The pool's address is the second argument, else
// THD_POOL_URL (thdrun --pool sets it); the token comes from the environment.
//
//   run URL      attach, check arithmetic on every node, shut down; exit 0, or 3 on
//                a wrong value
//   hold URL     attach, leave tensors on every node, print "holding: <live tensors
//                per node>", then wait to be killed (at most a minute)
//   attach URL   attach and shut down at once: prints "attached" and exits 0
//   flood URL BYTES
//                claim a session as a master does, then send node 0 BYTES of
//                messages on a tag its worker never receives, close the connections
//                cleanly (FIN, no reset) and exit 0, printing "flooded: N sent"
//   exit N       exit with status N without attaching
// Errors from thd are printed ("error: ...") and exit 4. The session's timeout is
// 10 s, or THD_POOL_MASTER_TIMEOUT_MS.
#include <thd/thd.h>

#include "master/pool_attach.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

std::chrono::milliseconds session_timeout() {
  const char* ms = std::getenv("THD_POOL_MASTER_TIMEOUT_MS");
  return ms != nullptr ? std::chrono::milliseconds(std::atoll(ms)) : std::chrono::seconds(10);
}

thd::MasterWorkerOptions pool_options(int argc, char** argv) {
  const char* url = argc > 2 ? argv[2] : std::getenv("THD_POOL_URL");
  if (url == nullptr) throw std::runtime_error("no pool address: give it as an argument or in THD_POOL_URL");
  return thd::MasterWorkerOptions{.init_method = url, .timeout = session_timeout()};
}

std::string join(const std::vector<uint64_t>& values) {
  std::string out;
  for (uint64_t v : values) out += (out.empty() ? "" : " ") + std::to_string(v);
  return out;
}

// On every node: (arange(8) + node) * 2, summed; checked against the formula.
int run() {
  int wrong = 0;
  for (int node = 0; node < thd::num_nodes(); ++node) {
    thd::NodeScope on(node);
    auto x = thd::DistributedTensor::arange(8, thd::kFloat32);
    auto y = (x + static_cast<float>(node)) * 2.0f;
    const float sum = y.sum().item<float>();
    const float expected = 2.0f * (28.0f + 8.0f * static_cast<float>(node));
    if (sum != expected) {
      std::fprintf(stderr, "node %d: sum %g, expected %g\n", node, sum, expected);
      ++wrong;
    }
  }
  return wrong == 0 ? 0 : 3;
}

int hold() {
  std::vector<thd::DistributedTensor> kept;
  for (int node = 0; node < thd::num_nodes(); ++node) {
    thd::NodeScope on(node);
    kept.push_back(thd::DistributedTensor::ones({64, 64}));
    kept.push_back(kept.back() * 3.0f);
  }
  thd::synchronize();
  std::printf("holding: %s\n", join(thd::detail::live_tensors_per_node()).c_str());
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::minutes(1));
  return 5;  // the test should have killed it by now
}

// What a client holding the token could do to a pool: fill node 0 with messages
// nobody will receive, past what the worker holds (its connection is then not
// read), and leave.
int flood(thd::MasterWorkerOptions options, size_t total) {
  options.backend = "tcp";  // what init_master_worker resolves before it attaches
  const thd::master::PoolSession pool = thd::master::attach_to_pool(options);
  thd::DataChannelOptions dc;
  dc.store = pool.store;
  dc.rank = 0;
  dc.world_size = pool.world_size;
  dc.timeout = options.timeout;
  auto channel = thd::DataChannel::create("tcp", dc);
  constexpr size_t kMessage = 32 << 10;
  constexpr int64_t kNobodysTag = 424242;
  const std::vector<uint8_t> block(kMessage, 0x5a);
  std::vector<thd::Request> sends;
  for (size_t sent = 0; sent < total; sent += kMessage) {
    sends.push_back(channel->isend_bytes(block, /*node 0=*/1, {.tag = kNobodysTag}));
  }
  // Every byte must be in the kernel before the close, or the FIN would wait
  // behind bytes the worker no longer reads.
  size_t left = 0;
  for (const thd::Request& r : sends) {
    try {
      r.wait(std::chrono::seconds(5));
    } catch (const std::exception&) {
      ++left;
    }
  }
  std::printf("flooded: %zu sent, %zu not\n", sends.size() - left, left);
  std::fflush(stdout);
  if (left != 0) return 6;
  sends.clear();
  channel.reset();  // closes every connection: a FIN each
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "exit" && argc > 2) return std::atoi(argv[2]);
    if (mode == "flood" && argc > 3) return flood(pool_options(argc, argv), std::stoull(argv[3]));
    if (mode != "run" && mode != "hold" && mode != "attach") {
      std::fprintf(stderr, "usage: thd_pool_master run|hold|attach [URL] | flood URL BYTES | exit N\n");
      return 2;
    }
    thd::init_master_worker(pool_options(argc, argv));
    std::printf("attached: %d nodes\n", thd::num_nodes());
    std::fflush(stdout);
    int status = 0;
    if (mode == "run") status = run();
    if (mode == "hold") status = hold();
    thd::shutdown();
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 4;
  }
}
