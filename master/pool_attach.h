// Attaching a master to a worker pool (`thdrun --pool`, thd-worker): the pool's
// store hands out sessions one at a time (docs/worker_pool.md; the store layout is
// protocol/pool_store.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <thd/distributed.h>
#include <thd/store.h>

namespace thd::master {

struct PoolSession {
  // The store the session's DataChannel rendezvous through (the pool's store
  // under a per-session prefix).
  std::shared_ptr<Store> store;
  int world_size = 0;  // master + the pool's workers
  uint64_t session = 0;
  // Ends the session's claim on the pool: marks it detached, so that a master
  // attaching next waits for the workers to finish it instead of being told "pool
  // busy". Call it once the workers were told Goodbye (thd::shutdown), and on every
  // path that gives the session up (a failed init, the session object's
  // destructor). Idempotent, never throws (a store that is gone is only logged);
  // the workers release the pool once each of them has finished the session.
  std::function<void()> detach;
};

// True when `options` name a pool rather than an SPMD rendezvous: init_method
// tcp://host:port with no rank given, and no RANK in the environment.
bool names_a_pool(const MasterWorkerOptions& options);

// Claims the pool for one session. Blocks at most options.timeout: while the
// pool's store is not up yet, and while the previous session is ending (its master
// detached or died and the workers are still freeing its tensors). Throws
// ValueError "pool busy" when another master's session is active (one that shows
// no sign of ending within a second), ValueError when the address is not a pool or
// options.world_size disagrees with it, TimeoutError when the previous session does
// not end in time (naming the nodes that did not finish it), and
// ConnectionError/TimeoutError/AuthError when the pool's store cannot be reached or
// refuses the token.
PoolSession attach_to_pool(const MasterWorkerOptions& options);

}  // namespace thd::master
