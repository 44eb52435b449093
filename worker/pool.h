// A pool worker: one node of a worker pool, serving master sessions one after
// another (docs/worker_pool.md; the store protocol is protocol/pool_store.h).
// thd-worker is a thin command line over serve_pool().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "worker/worker.h"

namespace thd::worker {

struct PoolOptions {
  // tcp://host:port of the pool's store.
  std::string pool_url;
  int node = -1;       // this worker's node, 0 .. num_nodes-1
  int num_nodes = 0;   // the pool's size; every worker (and the store's host) must agree
  // The shared secret of the store and of every session's DataChannel; when unset,
  // THD_AUTH_TOKEN or THD_AUTH_TOKEN_FILE.
  std::optional<std::string> token = std::nullopt;
  // Where this worker listens for its session peers (tcp backend).
  std::string bind_host = "127.0.0.1";
  // This process hosts the pool's store (listening on pool_url's host and port)
  // instead of connecting to one someone else hosts. The pool lives as long as
  // this process then.
  bool host_store = false;
  // How long to keep trying to reach the pool's store at start.
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(60);
  // How often an idle worker looks for the next session (and at `stop`).
  std::chrono::milliseconds poll_interval{10};
  // serve_pool returns once this reads true, between sessions (a signal handler
  // sets it; a session in progress is served to its end first).
  const std::atomic<bool>* stop = nullptr;
  // Called on the serving thread as each session starts and ends (for logs and for
  // a signal handler that must know whether a session is in progress).
  std::function<void(uint64_t session)> on_session_begin = {};
  // `how`: session_end_name() of the end, or the error that ended the session
  // ("error: ...", e.g. the master died while the DataChannel was being made).
  std::function<void(uint64_t session, const std::string& how)> on_session_end = {};
};

// Serves sessions until options.stop reads true. Every session's tensors are freed
// before the next session starts (worker::serve frees them). Throws ValueError for
// bad options or a pool of another size, AuthError when the store refuses the
// token, TimeoutError when the store cannot be reached within connect_timeout, and
// ConnectionError/PeerLost once the pool's store goes away (the pool has ended).
void serve_pool(const PoolOptions& options);

}  // namespace thd::worker
