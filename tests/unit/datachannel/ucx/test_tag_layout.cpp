// UCX's 64-bit tags: the native layout's fields round-trip, what does not fit is
// refused (never folded into bits another envelope uses), and a receive's tag and
// mask take exactly the messages MPI matching gives it, never the pipe's.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "datachannel/ucx/tag_layout.h"

namespace thd::detail::ucx {
namespace {

Envelope p2p(uint32_t group, int64_t tag, uint8_t dtype = detail::kRawBytes, uint64_t count = 8) {
  Envelope e;
  e.context = p2p_context(group);
  e.tag = tag;
  e.kind.op = MessageOp::P2P;
  e.kind.dtype = dtype;
  e.kind.count = count;
  return e;
}

// What UCX does with a posted receive's tag and mask.
bool matches(const NativeMatch& m, ucp_tag_t sent) { return ((sent ^ m.tag) & m.mask) == 0; }

TEST(UcxNativeTag, FieldsRoundTripAtTheirExtremes) {
  const std::vector<NativeFields> cases = {
      {0, 0, 0, 0},
      {kNativeRawBytes, kMaxNativeSender, kMaxNativeGroup, kMaxNativeTag},
      {static_cast<uint32_t>(DType::Float64), 1, 2, 3},
      {static_cast<uint32_t>(DType::Bool), kMaxNativeSender, 0, kMaxNativeTag},
  };
  for (const NativeFields& f : cases) {
    const ucp_tag_t t = pack_native(f);
    EXPECT_EQ(unpack_native(t), f);
    EXPECT_NE(t & kNativeBit, 0u);
    EXPECT_EQ(t & kInternalBit, 0u);
  }
}

TEST(UcxNativeTag, EveryDTypeAndRawBytesHaveCodesOfTheirOwn) {
  std::set<uint32_t> codes{native_dtype(detail::kRawBytes)};
  for (int d = 0; d < kNumDTypes; ++d) codes.insert(native_dtype(static_cast<uint8_t>(d)));
  EXPECT_EQ(codes.size(), static_cast<size_t>(kNumDTypes + 1));
  EXPECT_EQ(*codes.rbegin(), kNativeRawBytes);
}

TEST(UcxNativeTag, PointToPointEnvelopesThatFitAreNativeAndTheRestAreNot) {
  EXPECT_TRUE(fits_native(p2p(0, 0), 0));
  EXPECT_TRUE(fits_native(p2p(kMaxNativeGroup, kMaxNativeTag, static_cast<uint8_t>(DType::Float32)), kMaxNativeSender));
  // Past a field: refused, not wrapped into another envelope's bits.
  EXPECT_FALSE(fits_native(p2p(kMaxNativeGroup + 1, 0), 0));
  EXPECT_FALSE(fits_native(p2p(0, kMaxNativeTag + 1), 0));
  EXPECT_FALSE(fits_native(p2p(0, -1), 0));
  EXPECT_FALSE(fits_native(p2p(0, 0), kMaxNativeSender + 1));
  EXPECT_FALSE(fits_native(p2p(0, 0, /*dtype=*/200), 0));
  EXPECT_FALSE(native_tag(p2p(0, kMaxNativeTag + 1), 0).has_value());
  // Collectives: their kind holds more than a dtype, their tag a sequence number.
  Envelope coll = p2p(0, 0);
  coll.context = collective_context(0);
  EXPECT_FALSE(fits_native(coll, 0));
  Envelope reduce = p2p(0, 0);
  reduce.kind.op = MessageOp::Reduce;
  EXPECT_FALSE(fits_native(reduce, 0));
  Envelope rooted = p2p(0, 0);
  rooted.kind.root = 0;
  EXPECT_FALSE(fits_native(rooted, 0));
}

TEST(UcxNativeTag, DistinctEnvelopesGetDistinctTags) {
  std::set<ucp_tag_t> tags;
  size_t n = 0;
  for (uint32_t group : {0U, 1U, 2U, kMaxNativeGroup}) {
    for (int64_t tag : {int64_t{0}, int64_t{1}, int64_t{1} << 20, kMaxNativeTag}) {
      for (int sender : {0, 1, 1 << 13, kMaxNativeSender}) {
        for (uint8_t dtype : {uint8_t{0}, uint8_t{7}, detail::kRawBytes}) {
          tags.insert(*native_tag(p2p(group, tag, dtype), sender));
          ++n;
        }
      }
    }
  }
  EXPECT_EQ(tags.size(), n);
}

TEST(UcxNativeTag, AReceiveTakesItsSendersMessagesOfAnyDTypeOnItsGroupAndTagOnly) {
  const Envelope want = p2p(3, 17, static_cast<uint8_t>(DType::Float32));
  const NativeMatch from2 = native_match(want, 2);
  // Any dtype matches: the receive checks it on completion and names both kinds.
  EXPECT_TRUE(matches(from2, *native_tag(p2p(3, 17, static_cast<uint8_t>(DType::Float32)), 2)));
  EXPECT_TRUE(matches(from2, *native_tag(p2p(3, 17, detail::kRawBytes), 2)));
  EXPECT_EQ(unpack_native(*native_tag(p2p(3, 17, detail::kRawBytes), 2)).dtype, kNativeRawBytes);
  EXPECT_FALSE(matches(from2, *native_tag(p2p(3, 17), 1)));
  EXPECT_FALSE(matches(from2, *native_tag(p2p(3, 18), 2)));
  EXPECT_FALSE(matches(from2, *native_tag(p2p(2, 17), 2)));
  const NativeMatch any = native_match(want, kAnySource);
  for (int sender : {0, 1, 2, kMaxNativeSender}) {
    EXPECT_TRUE(matches(any, *native_tag(p2p(3, 17), sender))) << sender;
    EXPECT_EQ(unpack_native(*native_tag(p2p(3, 17), sender)).sender, sender);
  }
  EXPECT_FALSE(matches(any, *native_tag(p2p(3, 16), 0)));
}

TEST(UcxNativeTag, NativeAndPipeTagsNeverMatchEachOther) {
  const NativeMatch any = native_match(p2p(0, 0), kAnySource);
  for (int sender : {0, 1, kMaxNativeSender}) {
    for (uint32_t tag : {0U, 1U, 0xffffffffU}) {
      EXPECT_FALSE(matches(any, user_tag(sender, tag)));
    }
    EXPECT_FALSE(matches(any, internal_tag(sender, InternalMessage::Hello)));
    EXPECT_FALSE(matches(any, internal_tag(sender, InternalMessage::Goodbye)));
    // The pipe's receives match their tag exactly, which has the native bit clear.
    EXPECT_EQ(user_tag(sender, 0) & kNativeBit, 0u);
  }
}

}  // namespace
}  // namespace thd::detail::ucx
