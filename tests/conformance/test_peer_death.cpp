// A rank process killed with SIGKILL in the middle of a collective (blocking, or
// async on several tags) and of a receive: every other rank's pending operation that needs it fails with
// thd::PeerLost naming it, well before the operation's deadline, and later
// operations that need it fail the same way; point to point among the others
// keeps working.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "backends.h"
#include "checks.h"
#include "op_checks.h"
#include "rank_processes.h"
#include "tensors.h"

namespace thd::conformance {
namespace {

using std::chrono::milliseconds;

constexpr int kVictim = 2;
// The deadline of the operations the victim's death interrupts: PeerLost must
// come well before it.
constexpr milliseconds kOpTimeout{20000};
constexpr milliseconds kMustNoticeWithin{8000};

class PeerDeath : public ForkedRanksTest {};

// Requires `call` to fail with PeerLost naming the victim, within kMustNoticeWithin.
void require_peer_lost(const std::function<void()>& call, const std::string& what) {
  std::exception_ptr error;
  const milliseconds took = time_of([&] {
    try {
      call();
    } catch (...) {
      error = std::current_exception();
    }
  });
  require_error<PeerLost>(error, {}, what);
  try {
    std::rethrow_exception(error);
  } catch (const PeerLost& e) {
    const std::string msg = e.what();
    const bool named = e.context().peer == kVictim || msg.find("rank 2") != std::string::npos ||
                       msg.find("peer 2") != std::string::npos;
    require(named, what + ": the PeerLost does not name rank 2: " + msg);
  }
  require(took < kMustNoticeWithin, what + ": PeerLost came after " + std::to_string(took.count()) + " ms");
}

// Ranks 0 and 1 after the victim died: they still talk to each other, and
// anything that needs the victim fails at once.
void survivors_carry_on(DataChannel& dc) {
  const int other = 1 - dc.rank();
  Request sent = dc.isend(Tensor::full({3}, dc.rank() + 10, kInt64), other, {.tag = 7});
  Tensor got = Tensor::zeros({3}, kInt64);
  dc.recv(got, other, {.tag = 7});
  sent.wait();
  require_same(got, Tensor::full({3}, other + 10, kInt64), "recv between the survivors after rank 2 died");
  require_peer_lost([&] { dc.send(Tensor::ones({3}), kVictim, {.tag = 8, .timeout = kOpTimeout}); },
                    "send to the dead rank");
  require_peer_lost([&] { dc.barrier({.tag = 9, .timeout = kOpTimeout}); }, "barrier after rank 2 died");
}

// Forks 3 ranks; rank 2 reports when the others are about to block on it and is
// then killed. `survivor` is what ranks 0 and 1 run once rank 2 is ready.
void kill_victim_during(const std::string& backend, const std::function<void(DataChannel&)>& survivor) {
  Pipe ready;
  StoreWorld world(3, [&](int rank, const std::shared_ptr<Store>& store) {
    std::shared_ptr<DataChannel> dc = make_channel(backend, store, rank, 3);
    std::shared_ptr<DataChannel> survivors = dc->new_group({0, 1});
    dc->barrier();
    if (rank == kVictim) {
      ready.write_u16(1);
      for (;;) ::pause();  // until the SIGKILL
    }
    survivor(*dc);
    // Rank 0 hosts the store: it stays until rank 1 is done.
    survivors->barrier();
  });
  // Ranks 0 and 1 post their operations right after the barrier; give them a
  // moment to be blocked in them.
  ready.read_u16(milliseconds(30000));
  std::this_thread::sleep_for(milliseconds(300));
  ::kill(world.pid(kVictim), SIGKILL);
  const auto codes = world.wait_all(milliseconds(40000));
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 128 + SIGKILL})) << describe_exit_codes(codes);
}

TEST_P(PeerDeath, MidCollective) {
  kill_victim_during(backend(), [](DataChannel& dc) {
    Tensor t = Tensor::ones({1000});
    require_peer_lost([&] { dc.all_reduce(t, ReduceOp::Sum, {.tag = 1, .timeout = kOpTimeout}); },
                      "all_reduce while rank 2 died");
    survivors_carry_on(dc);
  });
}

// Async collectives on several tags, all pending on the collective engine when the
// victim dies: each one fails with PeerLost.
TEST_P(PeerDeath, MidAsyncCollectivesOnSeveralTags) {
  kill_victim_during(backend(), [](DataChannel& dc) {
    constexpr int kTags = 8;
    std::vector<Tensor> tensors;
    std::vector<Request> reqs;
    for (int tag = 1; tag <= kTags; ++tag) {
      tensors.push_back(Tensor::ones({1000}));
      reqs.push_back(dc.iall_reduce(tensors.back(), ReduceOp::Sum, {.tag = tag, .timeout = kOpTimeout}));
    }
    for (int tag = 1; tag <= kTags; ++tag) {
      require_peer_lost([&] { reqs[static_cast<size_t>(tag - 1)].wait(); },
                        "iall_reduce on tag " + std::to_string(tag) + " while rank 2 died");
    }
    survivors_carry_on(dc);
  });
}

TEST_P(PeerDeath, MidRecv) {
  kill_victim_during(backend(), [](DataChannel& dc) {
    Tensor t = Tensor::zeros({10});
    if (dc.rank() == 0) {
      require_peer_lost([&] { dc.recv(t, kVictim, {.tag = 1, .timeout = kOpTimeout}); }, "recv from rank 2 as it died");
    } else {
      Request r = dc.irecv(t, kVictim, {.tag = 1, .timeout = kOpTimeout});
      require_peer_lost([&] { r.wait(); }, "irecv from rank 2 as it died");
    }
    survivors_carry_on(dc);
  });
}

THD_CONFORMANCE_BACKENDS(PeerDeath);

}  // namespace
}  // namespace thd::conformance
