// The receive path of messages a pipe matches itself allocates nothing per
// message once warm: a point-to-point round trip over a library with its own
// matching (ucx) should cost what the library's own costs, and an allocation and
// a free a receive were a measurable part of it. Counted with a replaced global
// operator new, per thread, so that the transports' progress threads do not count.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "datachannel/pipe/pipe_transport.h"
#include "datachannel/transport_test_util.h"
#include "memory_pipe.h"

namespace {
thread_local long allocations_on_this_thread = 0;
}  // namespace

void* operator new(std::size_t n) {
  ++allocations_on_this_thread;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  ++allocations_on_this_thread;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace thd::test {
namespace {

using detail::pipe::PipeTransport;
using detail::pipe::PipeTuning;

constexpr char kToken[] = "native-recv-allocations";

struct NativeWorld {
  NativeWorld() : fabric(2, /*detects_silent_loss=*/true, /*native=*/true) {
    auto store = std::make_shared<HashStore>(std::chrono::milliseconds(5000));
    std::vector<std::thread> makers;
    for (int r = 0; r < 2; ++r) {
      makers.emplace_back([&, r] {
        ranks[static_cast<size_t>(r)] = std::make_unique<PipeTransport>(
            fabric.make_pipe(r),
            detail::pipe::PipeAuth{net::AuthToken(kToken, "test"), store, std::chrono::milliseconds(5000)},
            PipeTuning{});
      });
    }
    for (auto& t : makers) t.join();
  }
  PipeTransport& operator[](int r) { return *ranks[static_cast<size_t>(r)]; }
  MemoryFabric fabric;
  std::unique_ptr<PipeTransport> ranks[2];
};

TEST(PipeTransportNative, PostingAReceiveOfKnownLengthAllocatesNothingOnceWarm) {
  NativeWorld w;
  constexpr int kMessages = 200;
  const std::vector<uint8_t> data(8, 7);
  std::vector<uint8_t> got(8, 0);
  const Envelope envelope = raw_envelope(3, got.size());
  long made = 0;
  // One receive at a time, posted before its message: what is counted is the
  // engine's posting (its record, the library's receive), on this thread. The
  // first receive makes the record the others reuse: not counted.
  for (int i = 0; i <= kMessages; ++i) {
    RequestPtr r = new_request(w[1], "recv from rank 0");
    const long before = allocations_on_this_thread;
    w[1].post_recv(got, 0, envelope, r);
    if (i > 0) made += allocations_on_this_thread - before;
    RequestPtr s = isend(w[0], data, 1, 3);
    ASSERT_TRUE(wait_ok(w[1], *r));
    ASSERT_TRUE(wait_ok(w[0], *s));
    ASSERT_EQ(r->bytes, data.size());
  }
  EXPECT_EQ(got, data);
  // What is left is the in-memory pipe's queue growing a block now and then; a
  // record per receive would be at least one allocation each.
  EXPECT_LT(made, kMessages / 4) << made << " allocations for " << kMessages << " receives";
}

}  // namespace
}  // namespace thd::test
