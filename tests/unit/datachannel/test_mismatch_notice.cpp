#include <gtest/gtest.h>

#include <string>

#include <thd/error.h>

#include "datachannel/collective_envelope.h"
#include "datachannel/collectives/mismatch_notice.h"

namespace thd::detail {
namespace {

MessageKind kind(MessageOp op, uint64_t count, int32_t root = -1) {
  return {.op = op, .dtype = static_cast<uint8_t>(DType::Float32), .reduce = 0, .root = root, .count = count};
}

std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

TEST(MismatchNotice, RoundTripsThroughItsBytes) {
  const MismatchNotice n{kind(MessageOp::Broadcast, 4, 0), 7, kind(MessageOp::AllReduce, (uint64_t{1} << 40) + 3)};
  EXPECT_EQ(decode_mismatch_notice(encode_mismatch_notice(n)), n);
}

TEST(MismatchNotice, TravelsOnAPlaneOfItsOwnWithTheCallsTag) {
  const Envelope call = collective_envelope(3, 2, 41, kind(MessageOp::AllReduce, 4));
  const Envelope notice = mismatch_notice_envelope(call);
  EXPECT_EQ(notice.tag, call.tag);
  EXPECT_NE(notice.context, call.context);
  EXPECT_NE(notice.context, p2p_context(3));
  EXPECT_TRUE(is_mismatch_notice(notice));
  EXPECT_FALSE(is_mismatch_notice(call));
  EXPECT_EQ(notice.kind.count, kMismatchNoticeBytes);
}

// The receiving rank's error reads as the one the sender raised, from its side.
TEST(MismatchNotice, NamesTheSendersCallWhenItDiffersFromThisRanks) {
  const Envelope mine = collective_envelope(0, 0, 5, kind(MessageOp::AllReduce, 4));
  const MismatchNotice n{kind(MessageOp::Broadcast, 4, 0), 0, kind(MessageOp::AllReduce, 4)};
  const std::exception_ptr e = noticed_mismatch(2, 1, mine, n);
  EXPECT_NE(what_of(e).find("all_reduce: collectives do not match: rank 1 called broadcast(float32, 4 elements, "
                            "root 0) while this rank called all_reduce(float32, 4 elements, sum)"),
            std::string::npos)
      << what_of(e);
  EXPECT_THROW(std::rethrow_exception(e), ValueError);
}

TEST(MismatchNotice, NamesTheRankTheSenderHeardFromWhenTheSenderCalledTheSame) {
  const Envelope mine = collective_envelope(0, 0, 5, kind(MessageOp::Broadcast, 4, 0));
  const MismatchNotice n{kind(MessageOp::Broadcast, 4, 0), 0, kind(MessageOp::AllReduce, 4)};
  const std::string what = what_of(noticed_mismatch(2, 1, mine, n));
  EXPECT_NE(what.find("rank 0 called all_reduce(float32, 4 elements, sum) while this rank called "
                      "broadcast(float32, 4 elements, root 0)"),
            std::string::npos)
      << what;
}

TEST(MismatchNotice, SaysWhatItCanWhenEveryCallItNamesIsThisRanks) {
  const Envelope mine = collective_envelope(0, 0, 5, kind(MessageOp::AllReduce, 4));
  const MismatchNotice n{mine.kind, 0, mine.kind};
  const std::string what = what_of(noticed_mismatch(2, 1, mine, n));
  EXPECT_NE(what.find("collectives do not match: rank 1 found that a message of rank 0 does not fit "
                      "all_reduce(float32, 4 elements, sum)"),
            std::string::npos)
      << what;
}

}  // namespace
}  // namespace thd::detail
