// A rank that has done its part of a collective and closes its channel at once,
// while the others are still in that collective (the first rank out of a barrier,
// a leaf of a reduce), departed: it did not die, and the others finish without
// it. For anything that needs it later it is gone (PeerLost, at once).
#include <gtest/gtest.h>

#include <thread>

#include "backends.h"
#include "checks.h"
#include "rank_processes.h"
#include "tensors.h"

namespace thd::conformance {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kOpTimeout{20000};

class Departure : public ForkedRanksTest {};

TEST_P(Departure, RankThatLeavesAfterItsPartDoesNotFailTheOthers) {
  const std::string name = backend();
  StoreWorld world(3, [&](int rank, const std::shared_ptr<Store>& store) {
    std::shared_ptr<DataChannel> dc = make_channel(name, store, rank, 3);
    std::shared_ptr<DataChannel> stayers = dc->new_group({0, 1});
    dc->barrier();
    // Rank 2 sends its part of the reduce and leaves; rank 1 comes late, so rank 0
    // is still waiting for rank 1 when rank 2's channel closes. Before departures
    // were told from deaths, rank 0's liveness check failed the reduce here.
    if (rank == 1) std::this_thread::sleep_for(milliseconds(400));
    Tensor t = Tensor::full({4}, rank + 1, kInt64);
    dc->reduce(t, 0, ReduceOp::Sum, {.tag = 1, .timeout = kOpTimeout});
    if (rank == 2) {
      stayers.reset();
      dc.reset();  // says goodbye
      return;
    }
    if (rank == 0) require_same(t, Tensor::full({4}, 6, kInt64), "reduce whose leaf left early");
    // Later, a collective that needs rank 2 fails at once.
    std::exception_ptr error;
    const milliseconds took = time_of([&] {
      try {
        dc->barrier({.tag = 2, .timeout = kOpTimeout});
      } catch (...) {
        error = std::current_exception();
      }
    });
    require_error<PeerLost>(error, {}, "barrier after rank 2 left");
    require(took < milliseconds(5000), "the barrier after rank 2 left took " + std::to_string(took.count()) + " ms");
    // Rank 0 hosts the store: it stays until rank 1 is done.
    stayers->barrier();
  });
  const auto codes = world.wait_all(milliseconds(40000));
  EXPECT_EQ(codes, (std::vector<int>{0, 0, 0})) << describe_exit_codes(codes);
}

THD_CONFORMANCE_BACKENDS(Departure);

}  // namespace
}  // namespace thd::conformance
