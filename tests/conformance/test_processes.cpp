// Every op with ranks as separate processes (forked), joined through
// rendezvous("tcp://...") and through a TCPStore rank 0 hosts.
#include <gtest/gtest.h>

#include "backends.h"
#include "checks.h"
#include "op_checks.h"
#include "rank_processes.h"
#include "tensors.h"

namespace thd::conformance {
namespace {

using std::chrono::milliseconds;

class Processes : public ForkedRanksTest {};

TEST_P(Processes, EveryOpOverRendezvous) {
  const std::string b = backend();
  RendezvousWorld world(3, [b](int rank, const std::shared_ptr<Store>& store) {
    std::shared_ptr<DataChannel> dc = make_channel(b, store, rank, 3);
    exercise_every_op(*dc, 5000);
    check_all_reduce(*dc, kFloat32, large_numel(kFloat32), ReduceOp::Sum, 5100);
    std::shared_ptr<DataChannel> g = dc->new_group({2, 0});
    if (g->is_member()) exercise_every_op(*g, 5200);
    dc->barrier();  // nobody closes while others still talk to it
  });
  const auto codes = world.wait_all(milliseconds(60000));
  EXPECT_EQ(codes, std::vector<int>(3, 0)) << describe_exit_codes(codes);
}

TEST_P(Processes, EveryOpOverATCPStore) {
  const std::string b = backend();
  StoreWorld world(3, [b](int rank, const std::shared_ptr<Store>& store) {
    std::shared_ptr<DataChannel> dc = make_channel(b, store, rank, 3);
    exercise_every_op(*dc, 6000);
    dc->barrier();
  });
  const auto codes = world.wait_all(milliseconds(60000));
  EXPECT_EQ(codes, std::vector<int>(3, 0)) << describe_exit_codes(codes);
}

THD_CONFORMANCE_BACKENDS(Processes);

}  // namespace
}  // namespace thd::conformance
