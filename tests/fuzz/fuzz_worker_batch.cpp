// Fuzz target worker_batch: a worker node's whole command loop (worker::serve) —
// the framing of what arrives on its command tag, the verifier, the decoder and
// the dispatcher of every op, the uploads' frames beside the batches, the frames a
// peer node sends — run against a real session (handle table, streams, events)
// that earlier records of the same input filled. The master and the peer node are
// played from the input (worker_script.h) by a transport without a network
// (scripted_world.h), so the fuzzer reaches unknown and reused ids, wrong dtypes,
// huge shapes, overlapping views and out-of-range offsets at memory speed.
//
// What must hold, whatever the input:
// - serve() returns (it never throws for what the master sends, never hangs: every
//   receive is answered at once, and waits are bounded by the channel's timeout);
// - every reply the worker sends the master verifies (scripted_world.cpp);
// - the session's tensors never take more memory than its limit (SessionLimits),
//   give or take what ops stage on the way (checked on the allocator's peak; an op
//   that allocates without reserving first breaks it);
// - once the session has ended, every tensor it made is freed.
#include <chrono>

#include <thd/memory.h>

#include "fuzz_target.h"
#include "scripted_world.h"
#include "worker/worker.h"

namespace {

// Waits that the script cannot answer end at once (scripted_world.h); what is left
// (a stream waiting for another) ends here at the latest.
constexpr std::chrono::milliseconds kTimeout{2000};
// A small node: what an op may allocate stays far below libFuzzer's RSS limit.
constexpr size_t kMemoryLimit = size_t{16} << 20;
// What ops stage beyond what they reserve (a contiguous copy of an input, say).
constexpr int64_t kStagingAllowance = int64_t{kMemoryLimit};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace thd;
  const int64_t before = memory_stats().allocated_bytes;
  {
    auto transport = std::make_shared<fuzz::ScriptedTransport>(fuzz::decode_records({data, size}));
    auto channel = fuzz::scripted_channel(transport, kTimeout);
    worker::serve(channel, {.memory_bytes = kMemoryLimit});
  }
  // serve() resets the peak as its session starts.
  THD_FUZZ_CHECK(memory_stats().peak_allocated_bytes - before <= int64_t{kMemoryLimit} + kStagingAllowance,
                 "the session's tensors took more memory than its limit");
  THD_FUZZ_CHECK(memory_stats().allocated_bytes == before, "the session ended with tensors still allocated");
  empty_cache();
  return 0;
}
