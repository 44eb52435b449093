// The test-only ops (protocol/test_hooks.fbs): compiled only in builds with
// THD_ENABLE_TEST_HOOKS, and refused by a worker not run with THD_TEST_HOOKS=1.
#include <chrono>

#include "tensor/check.h"
#include "worker/ops.h"
#include "worker/session.h"

namespace thd::worker {

void run(ExecContext& ctx, const fb::TestLatch& op) {
  Session& session = ctx.session();
  if (!session.test_hooks()) {
    THD_THROW(ValueError, ctx.op_name(), "test hooks are off on node {} (THD_TEST_HOOKS=1 turns them on)",
              ctx.node());
  }
  if (op.open()) {
    session.open_latch(op.key());
    return;
  }
  if (!session.wait_latch(op.key(), std::chrono::milliseconds(op.timeout_ms()))) {
    THD_THROW(TimeoutError, ctx.op_name(), "latch {} was not opened within {} ms on node {} stream {}", op.key(),
              op.timeout_ms(), ctx.node(), ctx.stream());
  }
}

}  // namespace thd::worker
