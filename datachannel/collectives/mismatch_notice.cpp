#include "datachannel/collectives/mismatch_notice.h"

#include "datachannel/check.h"
#include "datachannel/wire.h"

namespace thd::detail {

namespace {

constexpr uint32_t kNoticePlane = 0x8000'0000U;
constexpr size_t kKindBytes = 16;

void put_kind(uint8_t* p, const MessageKind& k) noexcept {
  p[0] = static_cast<uint8_t>(k.op);
  p[1] = k.dtype;
  p[2] = k.reduce;
  p[3] = 0;
  le::put<int32_t>(p + 4, k.root);
  le::put<uint64_t>(p + 8, k.count);
}

MessageKind get_kind(const uint8_t* p) noexcept {
  MessageKind k;
  // describe() names op and dtype codes it does not know by number.
  k.op = static_cast<MessageOp>(p[0]);
  k.dtype = p[1];
  k.reduce = p[2];
  k.root = le::get<int32_t>(p + 4);
  k.count = le::get<uint64_t>(p + 8);
  return k;
}

}  // namespace

Envelope mismatch_notice_envelope(const Envelope& call) {
  return {call.context | kNoticePlane, call.tag,
          MessageKind{.op = MessageOp::P2P, .dtype = kRawBytes, .count = kMismatchNoticeBytes}};
}

bool is_mismatch_notice(const Envelope& e) noexcept { return (e.context & kNoticePlane) != 0; }

MismatchNoticeBytes encode_mismatch_notice(const MismatchNotice& notice) noexcept {
  MismatchNoticeBytes out{};
  put_kind(out.data(), notice.caller);
  le::put<int32_t>(out.data() + kKindBytes, notice.peer);
  put_kind(out.data() + kKindBytes + 8, notice.theirs);
  return out;
}

MismatchNotice decode_mismatch_notice(std::span<const uint8_t, kMismatchNoticeBytes> bytes) noexcept {
  MismatchNotice n;
  n.caller = get_kind(bytes.data());
  n.peer = le::get<int32_t>(bytes.data() + kKindBytes);
  n.theirs = get_kind(bytes.data() + kKindBytes + 8);
  return n;
}

std::exception_ptr noticed_mismatch(int rank, int sender, const Envelope& mine, const MismatchNotice& notice) {
  Envelope got = mine;
  if (notice.caller != mine.kind) {
    got.kind = notice.caller;
    return message_mismatch(rank, sender, mine, 0, got, 0);
  }
  if (notice.theirs != mine.kind) {
    got.kind = notice.theirs;
    return message_mismatch(rank, notice.peer, mine, 0, got, 0);
  }
  // Only the sizes differed where the sender looked.
  return error_at<ValueError>(std::string(message_op_name(mine.kind.op)), rank, sender,
                              "collectives do not match: rank {} found that a message of rank {} does not fit {}, "
                              "which this rank called too; every member of a group must issue the same collectives "
                              "in the same order with the same sizes",
                              sender, notice.peer, describe(mine.kind));
}

}  // namespace thd::detail
