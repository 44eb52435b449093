// The layout that packs collective messages into a library's 64-bit tag
// (pipe/collective_tag.h): what fits, what a receive matches, and what a
// mismatched message's tag tells its receiver.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "datachannel/collective_envelope.h"
#include "datachannel/envelope.h"
#include "datachannel/pipe/collective_tag.h"
#include "datachannel/unnamed_count.h"

namespace thd::test {
namespace {

using detail::Envelope;
using detail::MessageKind;
using detail::MessageOp;
using detail::pipe::CollectiveTagLayout;

MessageKind kind(MessageOp op, DType dtype, uint64_t count, int root = -1, ReduceOp reduce = ReduceOp::Sum) {
  return {op, static_cast<uint8_t>(dtype), static_cast<uint8_t>(reduce), root, count};
}

// A collective call's envelope, as launch_collective makes it.
Envelope call(uint32_t group, int64_t user_tag, uint32_t seq, const MessageKind& k) {
  return detail::collective_envelope(group, user_tag, seq, k);
}

const MessageKind kSum = kind(MessageOp::AllReduce, kFloat32, 1000);

bool matches(const CollectiveTagLayout::Match& m, uint64_t tag) { return (tag & m.mask) == (m.tag & m.mask); }

TEST(CollectiveTag, SizedByTheWorldAndRefusedWhereTheCountWouldBeTooShort) {
  const auto four = CollectiveTagLayout::make(64, 4);
  ASSERT_TRUE(four.has_value());
  EXPECT_EQ(four->sender_bits(), 2);
  EXPECT_EQ(four->count_bits(), 22);
  EXPECT_EQ(four->named_counts(), uint64_t{1} << 21);
  const auto one = CollectiveTagLayout::make(64, 1);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->sender_bits(), 1);
  EXPECT_EQ(CollectiveTagLayout::make(64, 128)->count_bits(), 12);
  EXPECT_FALSE(CollectiveTagLayout::make(64, 129).has_value());
  EXPECT_FALSE(CollectiveTagLayout::make(64, 1 << 20).has_value());
  EXPECT_FALSE(CollectiveTagLayout::make(48, 4).has_value());
  for (int world : {1, 2, 3, 5, 64, 128}) {
    const auto layout = CollectiveTagLayout::make(64, world);
    ASSERT_TRUE(layout.has_value()) << world;
    EXPECT_EQ(layout->match_mask() | layout->kind_mask(), ~uint64_t{0}) << world;
    EXPECT_EQ(layout->match_mask() & layout->kind_mask(), 0U) << world;
  }
}

TEST(CollectiveTag, FitsByGroupTagAndSenderOnlyNeverByKindOrSequence) {
  const auto layout = *CollectiveTagLayout::make(64, 5);
  EXPECT_TRUE(layout.fits(call(0, 0, 0, kSum), 0));
  EXPECT_TRUE(layout.fits(call(63, 63, UINT32_MAX, kind(MessageOp::Broadcast, kInt64, UINT64_MAX - 1, 4)), 7));
  EXPECT_FALSE(layout.fits(call(64, 0, 0, kSum), 0)) << "group past its field";
  EXPECT_FALSE(layout.fits(call(0, 64, 0, kSum), 0)) << "caller's tag past its field";
  EXPECT_FALSE(layout.fits(call(0, 0, 0, kSum), 8)) << "sender past the world's bits";
  Envelope p2p = call(0, 0, 0, kSum);
  p2p.context = detail::p2p_context(0);
  EXPECT_FALSE(layout.fits(p2p, 0)) << "point-to-point envelopes have their own layout";
  // The same (group, tag, sender) fits whatever the kind and the sequence number:
  // ranks that called different collectives still take the same path.
  for (const MessageKind& k : {kSum, kind(MessageOp::Barrier, kFloat32, 0), kind(MessageOp::Scatter, kUInt8, 7, 2),
                               kind(MessageOp::AllGather, kFloat64, uint64_t{1} << 40)}) {
    for (uint32_t seq : {0U, 4095U, 4096U, UINT32_MAX}) {
      EXPECT_TRUE(layout.fits(call(3, 9, seq, k), 4)) << describe(k) << " seq " << seq;
    }
  }
}

TEST(CollectiveTag, ReceivesMatchTheirStreamAndLeaveTheKindToTheCheck) {
  const auto layout = *CollectiveTagLayout::make(64, 4);
  const Envelope posted = call(2, 5, 17, kSum);
  const auto m = layout.match(posted, 3);
  EXPECT_TRUE(matches(m, *layout.tag_of(posted, 3)));
  EXPECT_TRUE(matches(m, *layout.tag_of(call(2, 5, 17, kind(MessageOp::Broadcast, kInt32, 9, 1)), 3)))
      << "another kind is matched, then named by the check";
  EXPECT_FALSE(matches(m, *layout.tag_of(posted, 2))) << "another sender";
  EXPECT_FALSE(matches(m, *layout.tag_of(call(2, 5, 18, kSum), 3))) << "the next call";
  EXPECT_FALSE(matches(m, *layout.tag_of(call(2, 6, 17, kSum), 3))) << "another caller's tag";
  EXPECT_FALSE(matches(m, *layout.tag_of(call(3, 5, 17, kSum), 3))) << "another group";
  EXPECT_TRUE(matches(m, *layout.tag_of(call(2, 5, 17 + 4096, kSum), 3))) << "the sequence wraps at 2^12";
  const auto any = layout.match(posted, kAnySource);
  for (int sender : {0, 1, 2, 3}) EXPECT_TRUE(matches(any, *layout.tag_of(posted, sender))) << sender;
  EXPECT_FALSE(matches(any, *layout.tag_of(call(2, 5, 18, kSum), 3)));
  EXPECT_EQ(layout.sender_of(*layout.tag_of(posted, 3)), 3);
  EXPECT_TRUE(layout.is_collective(*layout.tag_of(posted, 3)));
  EXPECT_EQ(*layout.tag_of(posted, 3) >> 62, 3U) << "both top bits mark a collective";
}

TEST(CollectiveTag, AMismatchedKindIsReadBackWhole) {
  const auto layout = *CollectiveTagLayout::make(64, 4);
  const Envelope posted = call(0, 1, 2, kSum);
  EXPECT_EQ(layout.arrival(posted, *layout.tag_of(posted, 1)).kind, kSum);
  const MessageKind others[] = {
      kind(MessageOp::AllReduce, kFloat32, 1001),
      kind(MessageOp::AllReduce, kInt32, 1000),
      kind(MessageOp::AllReduce, kFloat32, 1000, -1, ReduceOp::Max),
      kind(MessageOp::Broadcast, kFloat32, 1000, 0),
      kind(MessageOp::Broadcast, kFloat32, 1000, 3),
      kind(MessageOp::Reduce, kBFloat16, 0, 2, ReduceOp::BXor),
      MessageKind{MessageOp::AllGather, detail::kRawBytes, 0, -1, (uint64_t{1} << 21) - 1},
      MessageKind{MessageOp::Barrier, detail::kRawBytes, 0, -1, 0},
  };
  for (const MessageKind& k : others) {
    const Envelope got = layout.arrival(posted, *layout.tag_of(call(0, 1, 2, k), 1));
    EXPECT_EQ(got.kind, k) << describe(k);
    EXPECT_EQ(got.context, posted.context);
    EXPECT_EQ(got.tag, posted.tag);
  }
}

TEST(CollectiveTag, CountsPastTheFieldAreComparedByHashAndNamedAsTooLarge) {
  const auto layout = *CollectiveTagLayout::make(64, 4);
  const uint64_t big = uint64_t{1} << 30;
  const Envelope posted = call(0, 0, 0, kind(MessageOp::AllReduce, kFloat32, big));
  EXPECT_EQ(layout.arrival(posted, *layout.tag_of(posted, 0)).kind.count, big) << "the same count agrees";
  std::set<uint64_t> codes;
  for (uint64_t count : {big + 1, big - 1, big * 2, uint64_t{1} << 21, UINT64_MAX - 1}) {
    const uint64_t tag = *layout.tag_of(call(0, 0, 0, kind(MessageOp::AllReduce, kFloat32, count)), 0);
    codes.insert(tag & layout.kind_mask());
    const Envelope got = layout.arrival(posted, tag);
    EXPECT_EQ(got.kind.count, detail::kUnnamedCount) << count;
    EXPECT_NE(got.kind, posted.kind) << count;
    EXPECT_NE(describe(got.kind).find("too large"), std::string::npos) << describe(got.kind);
  }
  EXPECT_EQ(codes.size(), 5U);
}

}  // namespace
}  // namespace thd::test
