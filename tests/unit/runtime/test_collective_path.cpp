// How workers agree on the way a collective moves its tensors
// (worker/collective_path.h): device to device only when every member offers a GPU
// and no two offer the same one; the claims survive the exchange's encoding.
#include <gtest/gtest.h>


#include "worker/collective_path.h"

namespace thd::worker {
namespace {

GpuId gpu(uint8_t n) {
  GpuId id{};
  id[0] = 0xa0;
  id[15] = n;  // the last byte: the claim's third word
  return id;
}

MemberClaim offers(uint8_t n) { return {.refused_node = 0, .gpu = gpu(n)}; }

TEST(CollectivePath, EveryMemberOnAGpuOfItsOwnGoesDeviceToDevice) {
  const std::vector<MemberClaim> claims = {offers(1), offers(2), offers(3)};
  EXPECT_EQ(choose_path(claims), CollectivePath::Device);
  const std::vector<MemberClaim> one = {offers(7)};
  EXPECT_EQ(choose_path(one), CollectivePath::Device);
}

TEST(CollectivePath, MembersSharingAGpuStageThroughHostMemory) {
  // NCCL cannot run two ranks of a communicator on one GPU.
  const std::vector<MemberClaim> claims = {offers(1), offers(2), offers(1)};
  EXPECT_EQ(choose_path(claims), CollectivePath::Host);
}

TEST(CollectivePath, AnyMemberWithoutAGpuMakesEveryMemberStage) {
  const std::vector<MemberClaim> claims = {offers(1), MemberClaim{}, offers(2)};
  EXPECT_EQ(choose_path(claims), CollectivePath::Host);
  const std::vector<MemberClaim> refused = {offers(1), MemberClaim{.refused_node = 3}};
  EXPECT_EQ(choose_path(refused), CollectivePath::Host);
  EXPECT_EQ(choose_path(std::vector<MemberClaim>{}), CollectivePath::Host);
}

TEST(CollectivePath, ClaimsSurviveTheExchangesEncoding) {
  MemberClaim short_of_host_memory = offers(5);
  short_of_host_memory.cannot_stage_node = 4;
  MemberClaim fusable = offers(9);
  fusable.fused = int64_t{1} << 40;
  const std::vector<MemberClaim> claims = {offers(4), MemberClaim{.refused_node = 2}, fusable, short_of_host_memory};
  std::vector<Tensor> rows;
  for (const MemberClaim& c : claims) rows.push_back(encode_claim(c));
  const Tensor gathered = stack(rows);
  EXPECT_EQ(decode_claims(gathered), claims);
  // Only a [members, 5] int64 tensor is a set of claims.
  EXPECT_THROW(decode_claims(Tensor::zeros({3, 4}, kInt64)), ValueError);
  EXPECT_THROW(decode_claims(Tensor::zeros({3, 5}, kInt32)), ValueError);
}

TEST(CollectivePath, AMemberShortOfHostMemoryFailsTheCollectiveOnlyIfTheyStage) {
  // A GPU tensor larger than its worker's host memory limit still goes device to
  // device; staged, it cannot go at all, and every member says which node it is.
  MemberClaim short_of_host_memory = offers(2);
  short_of_host_memory.cannot_stage_node = 2;
  const std::vector<MemberClaim> device = {offers(1), short_of_host_memory};
  EXPECT_EQ(choose_path(device), CollectivePath::Device);
  const std::vector<MemberClaim> staged = {MemberClaim{}, short_of_host_memory};
  EXPECT_EQ(choose_path(staged), CollectivePath::Host);
  EXPECT_EQ(unable_to_stage(staged), 2);
  EXPECT_EQ(unable_to_stage(std::vector<MemberClaim>{offers(1), MemberClaim{}}), 0);
}

TEST(CollectivePath, CpuTensorsOfferNoGpu) {
  EXPECT_EQ(device_path_gpu(Tensor::ones({4}), ReduceOp::Sum), std::nullopt);
  EXPECT_EQ(device_path_gpu(Tensor::ones({4}), std::nullopt), std::nullopt);
}

}  // namespace
}  // namespace thd::worker
