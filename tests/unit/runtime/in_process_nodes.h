// A master session over worker nodes served by threads of this process (tcp over
// loopback), so that process-wide counters (thd::memory_stats()) see every node's
// tensors. The session becomes the current one; stop() shuts it down and joins the
// workers.
#pragma once

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <thd/datachannel.h>
#include <thd/distributed.h>
#include <thd/store.h>

#include "datachannel/test_util.h"
#include "master/session.h"
#include "worker/worker.h"

namespace thd::test {

class InProcessNodes {
 public:
  InProcessNodes(int nodes, const worker::SessionLimits& limits) {
    using std::chrono::seconds;
    const int world = nodes + 1;
    auto store = std::make_shared<HashStore>();
    std::vector<std::shared_ptr<DataChannel>> channels(static_cast<size_t>(world));
    auto errors = run_rank_threads(world, [&](int rank) {
      DataChannelOptions o{.store = store, .rank = rank, .world_size = world, .timeout = seconds(10), .token = kToken};
      channels[static_cast<size_t>(rank)] = DataChannel::create("tcp", o);
    });
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    for (size_t w = 1; w < channels.size(); ++w) {
      workers_.emplace_back([c = channels[w], limits] { worker::serve(c, limits); });
    }
    MasterWorkerOptions options;
    options.timeout = seconds(10);
    auto session = std::make_shared<master::Session>(channels[0], options, std::function<void()>{});
    session->start(/*session_id=*/1, /*seed=*/1);
    master::set_current_session(session);
  }
  InProcessNodes(const InProcessNodes&) = delete;
  InProcessNodes& operator=(const InProcessNodes&) = delete;
  ~InProcessNodes() { join(); }

  // After thd::shutdown(): the workers' threads end with the session.
  void join() {
    for (auto& w : workers_) {
      if (w.joinable()) w.join();
    }
  }

 private:
  std::vector<std::thread> workers_;
};

}  // namespace thd::test
