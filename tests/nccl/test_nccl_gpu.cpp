// The nccl backend on GPUs. One GPU runs a world of one rank, and the failure
// cases whose other ranks never touch a GPU; the cases for two ranks need two
// GPUs (NCCL runs each rank on a GPU of its own) and skip saying so.
#include <gtest/gtest.h>

#include <thd/cuda.h>
#include <thd/datachannel.h>

#include "datachannel/group_state.h"
#include "datachannel/nccl/nccl_backend.h"
#include "datachannel/nccl/nccl_rendezvous.h"
#include "expect_throw.h"
#include "nccl_test_util.h"

namespace thd::test {
namespace {

using detail::nccl::collectives_of;
using detail::nccl::NcclCollectives;

constexpr int64_t kN = 200;  // small integers: exact in every dtype tested, bfloat16 included

const std::vector<DType> kDTypes = {kFloat32, kFloat16, kBFloat16, kInt64};

// 0, 1, ..., n-1 scaled and shifted, on the CPU.
Tensor values(int64_t n, DType dtype, double scale = 1, double shift = 0) {
  return (Tensor::arange(0, n, 1, kFloat64) * scale + shift).to(dtype);
}

// A CUDA tensor whose every element is -3, so an element NCCL did not write shows.
Tensor poisoned(const Shape& shape, DType dtype, int device = 0) {
  return Tensor::full(shape, -3, dtype).to(Device::cuda(device));
}

std::vector<double> host_values(const Tensor& t) { return t.cpu().to_vector<double>(); }

NcclCollectives& nccl_of(DataChannel& ch) { return *collectives_of(detail::state_of(ch)); }

TEST(NcclWorldOfOne, ReducesEveryDTypeInPlace) {
  THD_REQUIRE_GPUS(1);
  run_world("nccl", 1, [](int, const std::shared_ptr<DataChannel>& ch) {
    auto& nccl = nccl_of(*ch);
    for (DType dtype : kDTypes) {
      SCOPED_TRACE(dtype_name(dtype));
      const Tensor want = values(kN, dtype, 1, -50);
      std::vector<ReduceOp> ops = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min};
      if (is_floating_point(dtype)) ops.push_back(ReduceOp::Avg);
      for (ReduceOp op : ops) {
        SCOPED_TRACE(reduce_op_name(op));
        Tensor t = want.cuda();
        nccl.all_reduce(detail::state_of(*ch), t, op, {}).wait();
        EXPECT_EQ(host_values(t), want.to_vector<double>());
        Tensor r = want.cuda();
        nccl.reduce(detail::state_of(*ch), r, 0, op, {}).wait();
        EXPECT_EQ(host_values(r), want.to_vector<double>());
      }
      Tensor b = want.cuda();
      nccl.broadcast(detail::state_of(*ch), b, 0, {}).wait();
      EXPECT_EQ(host_values(b), want.to_vector<double>());
    }
  });
}

TEST(NcclWorldOfOne, WritesEveryElementOfPoisonedOutputs) {
  THD_REQUIRE_GPUS(1);
  run_world("nccl", 1, [](int, const std::shared_ptr<DataChannel>& ch) {
    auto& nccl = nccl_of(*ch);
    auto& g = detail::state_of(*ch);
    for (DType dtype : kDTypes) {
      SCOPED_TRACE(dtype_name(dtype));
      const Tensor in = values(kN, dtype, 1, 1);
      const std::vector<double> want = in.to_vector<double>();
      Tensor gathered = poisoned({1, kN}, dtype);
      nccl.all_gather(g, gathered, in.cuda(), {}).wait();
      EXPECT_EQ(host_values(gathered), want);
      Tensor scattered = poisoned({kN}, dtype);
      nccl.reduce_scatter(g, scattered, in.cuda(), ReduceOp::Sum, {}).wait();
      EXPECT_EQ(host_values(scattered), want);
      Tensor at_root = poisoned({kN}, dtype);
      nccl.gather(g, at_root, in.cuda(), 0, {}).wait();
      EXPECT_EQ(host_values(at_root), want);
      Tensor from_root = poisoned({kN}, dtype);
      nccl.scatter(g, from_root, in.cuda(), 0, {}).wait();
      EXPECT_EQ(host_values(from_root), want);
      Tensor exchanged = poisoned({kN}, dtype);
      nccl.all_to_all(g, exchanged, in.cuda(), {}).wait();
      EXPECT_EQ(host_values(exchanged), want);
    }
  });
}

TEST(NcclWorldOfOne, ReadsAStridedInput) {
  THD_REQUIRE_GPUS(1);
  run_world("nccl", 1, [](int, const std::shared_ptr<DataChannel>& ch) {
    const Tensor in = values(6 * 4, kFloat32).reshape({6, 4});
    Tensor out = poisoned({4, 6}, kFloat32);
    nccl_of(*ch).all_gather(detail::state_of(*ch), out, in.cuda().t(), {}).wait();
    EXPECT_EQ(host_values(out), in.t().contiguous().to_vector<double>());
  });
}

TEST(NcclWorldOfOne, SendsToItselfInABatch) {
  THD_REQUIRE_GPUS(1);
  run_world("nccl", 1, [](int, const std::shared_ptr<DataChannel>& ch) {
    const Tensor msg = values(kN, kBFloat16, 0.5);
    Tensor got = poisoned({kN}, kBFloat16);
    using Item = NcclCollectives::P2PItem;
    std::vector<Item> items;
    items.push_back({Item::Kind::Send, msg.cuda(), 0});
    items.push_back({Item::Kind::Recv, got, 0});
    Request r = nccl_of(*ch).batch_send_recv(detail::state_of(*ch), std::move(items), {});
    r.wait();
    EXPECT_EQ(host_values(got), msg.to_vector<double>());
    EXPECT_EQ(r.bytes(), 2 * msg.nbytes());
    // One at a time it would wait on itself: refused, saying what to use.
    THD_EXPECT_THROW_MSG(nccl_of(*ch).send(detail::state_of(*ch), msg.cuda(), 0, {}), ValueError, "batch_send_recv");
  });
}

TEST(NcclWorldOfOne, RequestsAreAsynchronousAndWaitable) {
  THD_REQUIRE_GPUS(1);
  run_world("nccl", 1, [](int, const std::shared_ptr<DataChannel>& ch) {
    auto& nccl = nccl_of(*ch);
    const int64_t n = int64_t{1} << 22;  // 16 MiB: long enough to be seen in flight
    const Tensor in = Tensor::full({n}, 2, kFloat32);
    Tensor out = poisoned({n}, kFloat32);
    std::vector<Request> requests;
    for (int i = 0; i < 4; ++i) requests.push_back(nccl.all_gather(detail::state_of(*ch), out, in.cuda(), {}));
    Tensor t = in.cuda();
    Request last = nccl.all_reduce(detail::state_of(*ch), t, ReduceOp::Max, {});
    last.wait(std::chrono::seconds(10));
    EXPECT_TRUE(last.test());
    EXPECT_EQ(last.error(), nullptr);
    EXPECT_EQ(last.bytes(), t.nbytes());
    // Issued on one stream, they ran in order: the last done means all are.
    for (const Request& r : requests) EXPECT_TRUE(r.test());
    wait_all(requests);
    EXPECT_EQ(out.cpu().to_vector<float>(), std::vector<float>(static_cast<size_t>(n), 2.0f));
  });
}

TEST(NcclWorldOfOne, MakesOneCommunicatorPerGroupAndReusesIt) {
  THD_REQUIRE_GPUS(1);
  run_world("nccl", 1, [](int, const std::shared_ptr<DataChannel>& ch) {
    auto& nccl = nccl_of(*ch);
    EXPECT_EQ(nccl.stats().communicators_created, 0u);
    Tensor t = values(kN, kFloat32).cuda();
    nccl.all_reduce(detail::state_of(*ch), t, ReduceOp::Sum, {}).wait();
    EXPECT_EQ(nccl.stats().communicators_created, 1u);
    nccl.all_reduce(detail::state_of(*ch), t, ReduceOp::Sum, {}).wait();
    nccl.barrier(detail::state_of(*ch), {}).wait();
    Tensor out = poisoned({kN}, kFloat32);
    nccl.all_gather(detail::state_of(*ch), out, t, {}).wait();
    EXPECT_EQ(nccl.stats().communicators_created, 1u);
    EXPECT_EQ(nccl.stats().operations, 4u);
    // A subgroup, even of the same ranks, is a group of its own.
    auto group = ch->new_group({0});
    nccl.all_reduce(detail::state_of(*group), t, ReduceOp::Sum, {}).wait();
    nccl.all_reduce(detail::state_of(*group), t, ReduceOp::Sum, {}).wait();
    EXPECT_EQ(nccl.stats().communicators_created, 2u);
  });
}

TEST(NcclWorldOfOne, RuntimeHookRunsNcclBesideATcpChannel) {
  THD_REQUIRE_GPUS(1);
  run_world("tcp", 1, [](int, const std::shared_ptr<DataChannel>& ch) {
    auto nccl = detail::nccl::make_collectives(*ch);
    const Tensor want = values(kN, kFloat16, 0.25);
    Tensor t = want.cuda();
    nccl->all_reduce(detail::state_of(*ch), t, ReduceOp::Avg, {}).wait();
    EXPECT_EQ(host_values(t), want.to_vector<double>());
    EXPECT_EQ(nccl->stats().communicators_created, 1u);
  });
}

TEST(NcclFailures, AMemberThatNeverJoinsIsATimeoutNamingIt) {
  THD_REQUIRE_GPUS(1);
  // Rank 1 never issues a device operation (and never touches a GPU).
  run_world("nccl", 2, [](int rank, const std::shared_ptr<DataChannel>& ch) {
    if (rank != 0) return;
    auto& nccl = nccl_of(*ch);
    Tensor t = Tensor::ones({8}).cuda();
    const auto started = std::chrono::steady_clock::now();
    THD_EXPECT_THROW_MSG(nccl.all_reduce(detail::state_of(*ch), t, ReduceOp::Sum, {.timeout = std::chrono::milliseconds(400)}),
                         TimeoutError, "member 1 (world rank 1) did not arrive");
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(3));
    // The group's device operations are over; the error says why and what to do.
    THD_EXPECT_THROW_MSG(nccl.all_reduce(detail::state_of(*ch), t, ReduceOp::Sum, {}), ValueError, "make a new group");
  });
}

TEST(NcclFailures, AMemberThatNeverStartsNcclIsATimeoutAndAnAbort) {
  THD_REQUIRE_GPUS(1);
  run_world("nccl", 2, [](int rank, const std::shared_ptr<DataChannel>& ch) {
    if (rank == 1) {
      // Rank 1 arrives in the store as a member on a GPU of another host, then never
      // calls NCCL: rank 0 passes the store and waits in NCCL's own set-up.
      detail::nccl::Placement elsewhere{"elsewhere", "elsewhere", "0000:00:00.0", 0, 1};
      detail::state_of(*ch).store->set("nccl/1/group0/member/1", detail::nccl::encode(elsewhere));
      return;
    }
    Tensor t = Tensor::ones({8}).cuda();
    const auto started = std::chrono::steady_clock::now();
    THD_EXPECT_THROW_MSG(
        nccl_of(*ch).all_reduce(detail::state_of(*ch), t, ReduceOp::Sum, {.timeout = std::chrono::milliseconds(1500)}),
        TimeoutError, "NCCL did not set up communicator");
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(6));
  });
}

TEST(NcclFailures, TwoRanksOnOneGpuAreRefusedNamingTheCounts) {
  THD_REQUIRE_GPUS(1);
  if (cuda::device_count() != 1) GTEST_SKIP() << "needs a machine with exactly one GPU";
  run_world("nccl", 2, [](int, const std::shared_ptr<DataChannel>& ch) {
    Tensor t = Tensor::ones({8}).cuda(0);
    try {
      nccl_of(*ch).all_reduce(detail::state_of(*ch), t, ReduceOp::Sum, {}).wait();
      ADD_FAILURE() << "two ranks on one GPU were not refused";
    } catch (const ValueError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("cannot run two ranks of a communicator on one GPU"), std::string::npos) << what;
      EXPECT_NE(what.find("has 2 ranks on"), std::string::npos) << what;
      EXPECT_NE(what.find("which has 1 GPU, so it needs 1 more"), std::string::npos) << what;
    }
  });
}

// ---- two ranks, two GPUs ---------------------------------------------------------

TEST(NcclTwoRanks, CollectivesCombineBothRanks) {
  THD_REQUIRE_GPUS(2);
  run_world("nccl", 2, [](int rank, const std::shared_ptr<DataChannel>& ch) {
    auto& nccl = nccl_of(*ch);
    auto& g = detail::state_of(*ch);
    for (DType dtype : kDTypes) {
      SCOPED_TRACE(dtype_name(dtype));
      const Tensor mine = values(kN, dtype, 1, rank);  // rank 0: i, rank 1: i + 1
      Tensor sum = mine.cuda(rank);
      nccl.all_reduce(g, sum, ReduceOp::Sum, {}).wait();
      EXPECT_EQ(host_values(sum), values(kN, dtype, 2, 1).to_vector<double>());
      Tensor max = mine.cuda(rank);
      nccl.all_reduce(g, max, ReduceOp::Max, {}).wait();
      EXPECT_EQ(host_values(max), values(kN, dtype, 1, 1).to_vector<double>());
      Tensor b = mine.cuda(rank);
      nccl.broadcast(g, b, 1, {}).wait();
      EXPECT_EQ(host_values(b), values(kN, dtype, 1, 1).to_vector<double>());
      Tensor gathered = poisoned({2, kN}, dtype, rank);
      nccl.all_gather(g, gathered, mine.cuda(rank), {}).wait();
      std::vector<double> both = values(kN, dtype).to_vector<double>();
      const auto second = values(kN, dtype, 1, 1).to_vector<double>();
      both.insert(both.end(), second.begin(), second.end());
      EXPECT_EQ(host_values(gathered), both);
      Tensor half = poisoned({kN / 2}, dtype, rank);
      nccl.reduce_scatter(g, half, mine.cuda(rank), ReduceOp::Sum, {}).wait();
      EXPECT_EQ(host_values(half),
                values(kN, dtype, 2, 1).narrow(0, rank * (kN / 2), kN / 2).contiguous().to_vector<double>());
    }
  });
}

TEST(NcclTwoRanks, SendAndReceiveOnAPairCommunicator) {
  THD_REQUIRE_GPUS(2);
  run_world("nccl", 2, [](int rank, const std::shared_ptr<DataChannel>& ch) {
    auto& nccl = nccl_of(*ch);
    const Tensor msg = values(kN, kInt64, 3);
    if (rank == 0) {
      nccl.send(detail::state_of(*ch), msg.cuda(0), 1, {}).wait();
    } else {
      Tensor got = poisoned({kN}, kInt64, 1);
      Request r = nccl.recv(detail::state_of(*ch), got, 0, {});
      r.wait();
      EXPECT_EQ(r.source(), 0);
      EXPECT_EQ(host_values(got), msg.to_vector<double>());
    }
    EXPECT_EQ(nccl.stats().communicators_created, 1u);
  });
}

TEST(NcclTwoRanks, ACollectiveAMemberSkipsTimesOutAndAbortsTheCommunicator) {
  THD_REQUIRE_GPUS(2);
  run_world("nccl", 2, [](int rank, const std::shared_ptr<DataChannel>& ch) {
    auto& nccl = nccl_of(*ch);
    Tensor t = Tensor::ones({64}).cuda(rank);
    nccl.all_reduce(detail::state_of(*ch), t, ReduceOp::Sum, {}).wait();  // both: the communicator is up
    if (rank == 1) return;  // rank 1 skips the second one
    Request r = nccl.all_reduce(detail::state_of(*ch), t, ReduceOp::Sum, {.timeout = std::chrono::milliseconds(500)});
    const auto started = std::chrono::steady_clock::now();
    EXPECT_THROW(r.wait(), TimeoutError);
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
    THD_EXPECT_THROW_MSG(nccl.all_reduce(detail::state_of(*ch), t, ReduceOp::Sum, {}), ValueError, "was aborted");
  });
}

TEST(NcclTwoRanks, ATensorOnAnotherGpuThanTheGroupsIsRefused) {
  THD_REQUIRE_GPUS(2);
  run_world("nccl", 1, [](int, const std::shared_ptr<DataChannel>& ch) {
    auto& nccl = nccl_of(*ch);
    Tensor on0 = Tensor::ones({4}).cuda(0);
    nccl.all_reduce(detail::state_of(*ch), on0, ReduceOp::Sum, {}).wait();
    Tensor on1 = Tensor::ones({4}).cuda(1);
    THD_EXPECT_THROW_MSG(nccl.all_reduce(detail::state_of(*ch), on1, ReduceOp::Sum, {}), ValueError,
                         "the tensor is on cuda:1 but this group's NCCL communicator runs on cuda:0");
  });
}

}  // namespace
}  // namespace thd::test
