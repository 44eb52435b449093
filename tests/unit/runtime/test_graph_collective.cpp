// What the members of a graph's all_reduce settle once (worker/graph_collective.h):
// the one-exchange form when every member offers the same key, the layout each
// member settled with, and the words a replay sends beside its data.
#include <gtest/gtest.h>

#include <vector>

#include "worker/graph_collective.h"

namespace thd::worker {
namespace {

MemberClaim fusable(int64_t key) { return {.fused = key}; }

TEST(GraphCollective, MembersSettleOnTheOneExchangeFormOnlyWhenEveryKeyIsTheSame) {
  const TensorLayout mine{Device::cpu(), kFloat32, 256, true};
  SettledCollective s;
  EXPECT_FALSE(s.fused());
  s.settle(std::vector<MemberClaim>{fusable(42), fusable(42), fusable(42)}, mine);
  EXPECT_TRUE(s.fused());
  EXPECT_EQ(s.layout(), mine);
  EXPECT_EQ(s.settlements(), 1u);

  SettledCollective differ;  // another size on one member
  differ.settle(std::vector<MemberClaim>{fusable(42), fusable(43), fusable(42)}, mine);
  EXPECT_FALSE(differ.fused());
  SettledCollective none;  // one member cannot take the form (a GPU tensor)
  none.settle(std::vector<MemberClaim>{fusable(0), fusable(0)}, mine);
  EXPECT_FALSE(none.fused());
  SettledCollective partly;
  partly.settle(std::vector<MemberClaim>{fusable(42), fusable(0)}, mine);
  EXPECT_FALSE(partly.fused());
  SettledCollective refused;  // never settled by an exchange a member refused
  refused.settle(std::vector<MemberClaim>{fusable(42), MemberClaim{.refused_node = 2, .fused = 42}}, mine);
  EXPECT_FALSE(refused.fused());
  EXPECT_EQ(refused.settlements(), 0u);

  s.unsettle();
  EXPECT_FALSE(s.fused());
  s.settle(std::vector<MemberClaim>{fusable(42), fusable(42)}, mine);
  EXPECT_EQ(s.settlements(), 2u);
}

TEST(GraphCollective, ALayoutChangeIsSeenByDeviceDtypeSizeAndContiguity) {
  const TensorLayout settled{Device::cpu(), kFloat32, 256, true};
  EXPECT_EQ(layout_of(Tensor::zeros({16, 16}, kFloat32)), settled);
  EXPECT_NE(layout_of(Tensor::zeros({16, 16}, kFloat64)), settled);
  EXPECT_NE(layout_of(Tensor::zeros({16, 8}, kFloat32)), settled);
  EXPECT_NE(layout_of(Tensor::zeros({16, 16}, kFloat32).t()), settled);
  EXPECT_NE((TensorLayout{Device(DeviceType::CUDA, 0), kFloat32, 256, true}), settled);
}

TEST(GraphCollective, WordsCarryTheRefusingNodeAndAStaleTensorAndCombineAsTheClaimsDo) {
  for (const ReplayWord w : {ReplayWord{}, ReplayWord{.refused_node = 3}, ReplayWord{.stale = true},
                             ReplayWord{.refused_node = 70000, .stale = true}}) {
    EXPECT_EQ(decode_word(encode_word(w)), w);
  }
  EXPECT_EQ(encode_word(ReplayWord{}), 0);
  const std::vector<int64_t> words = {encode_word({.refused_node = 2}), 0, encode_word({.refused_node = 3}),
                                      encode_word({.stale = true})};
  EXPECT_EQ(combine_words(words), (ReplayWord{.refused_node = 3, .stale = true}));
  EXPECT_EQ(combine_words(std::vector<int64_t>{0, 0}), ReplayWord{});
}

}  // namespace
}  // namespace thd::worker
