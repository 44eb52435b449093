// How a collective's messages are packed into a 64-bit library tag (UCX's, or a
// libfabric provider's of at least kMinUsableBits), so the library matches them
// itself as it does point-to-point messages (ucx/tag_layout.h,
// libfabric/tag_layout.h). Over the tag's U usable bits, from the top:
//
//   bits U-1, U-2   both 1: a collective message (no other tag of either pipe sets
//                   both: a pipe's own messages clear U-2, point-to-point U-1)
//   count field     the call's element count, exact below 2^(count_bits-1); a
//                   larger one sets the field's top bit over a hash of the count
//   root_bits       the root (a group rank) + 1; 0 for collectives without one
//   3 bits          the reduce op
//   4 bits          the dtype, or kRawBytesCode
//   4 bits          the op (MessageOp)
//   sender_bits     the sender's world rank (bit_width(world size - 1) bits)
//   6 bits          the group id (the envelope's collective context / 2)
//   6 bits          the caller's tag (collective_envelope.h)
//   12 bits         the call's sequence number on (group, tag), modulo 2^12
//
// A receive matches the marker bits, group, tag, sequence and sender; the kind
// (op .. count) is left out of its mask and compared with the receive's own when
// the message lands (arrival()), so a mismatched collective is named as the
// control path names it: both kinds, with the peer's count unless it was too large
// for its field. Whether an envelope is native depends only on its group, its
// caller's tag and the sender, never on its kind or sequence, so the ranks of a
// mismatched call agree on the path and every message of one (context, tag) takes
// the same one.
//
// The sequence wraps: calls 4096 apart on one (group, tag) share a tag. They are
// matched in order all the same (calls on one (group, tag) run one after another
// on every rank, and the library matches one sender's messages of one tag in the
// order they were sent); only a message a failed call left behind unreceived is
// taken, 4096 calls later, by a receive of the same kind and length.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>

#include <thd/datachannel.h>
#include <thd/dtype.h>

#include "datachannel/collective_envelope.h"
#include "datachannel/envelope.h"
#include "datachannel/unnamed_count.h"

namespace thd::detail::pipe {

class CollectiveTagLayout {
 public:
  static constexpr int kSeqBits = 12;
  static constexpr int kTagBits = 6;
  static constexpr int kGroupBits = 6;
  static constexpr int kOpBits = 4;
  static constexpr int kDTypeBits = 4;
  static constexpr int kReduceBits = 3;
  // Below this many bits of count, no layout: a count field so short would leave
  // most mismatched counts unnamed. With 64 bits that admits worlds of up to 128.
  static constexpr int kMinCountBits = 12;
  static constexpr uint32_t kRawBytesCode = (1U << kDTypeBits) - 1;
  static_assert(kNumDTypes < static_cast<int>(kRawBytesCode), "every dtype and raw bytes need a code of their own");
  static_assert(static_cast<int>(kLastMessageOp) < (1 << kOpBits));
  static_assert(static_cast<int>(ReduceOp::BXor) < (1 << kReduceBits));

  // The layout over `usable` tag bits for a world of `world_size`; nullopt when
  // fewer than kMinCountBits would be left for the count.
  static constexpr std::optional<CollectiveTagLayout> make(int usable, int world_size) {
    if (usable > 64 || world_size < 1) return std::nullopt;
    const int sender_bits = std::max(1, static_cast<int>(std::bit_width(static_cast<uint32_t>(world_size - 1))));
    const int root_bits = static_cast<int>(std::bit_width(static_cast<uint32_t>(world_size)));
    const int count_bits = usable - 2 - kSeqBits - kTagBits - kGroupBits - sender_bits - kOpBits - kDTypeBits -
                           kReduceBits - root_bits;
    if (count_bits < kMinCountBits) return std::nullopt;
    return CollectiveTagLayout(usable, sender_bits, root_bits, count_bits);
  }

  constexpr int usable() const noexcept { return usable_; }
  constexpr int sender_bits() const noexcept { return sender_bits_; }
  constexpr int root_bits() const noexcept { return root_bits_; }
  constexpr int count_bits() const noexcept { return count_bits_; }
  // Counts below this travel exactly.
  constexpr uint64_t named_counts() const noexcept { return uint64_t{1} << (count_bits_ - 1); }
  constexpr uint64_t marker() const noexcept { return uint64_t{3} << (usable_ - 2); }
  // The bits a receive matches on.
  constexpr uint64_t match_mask() const noexcept { return marker() | field(kMatchedBits + sender_bits_, 0); }
  constexpr uint64_t kind_mask() const noexcept { return field(usable_ - 2 - kind_shift(), kind_shift()); }

  // Whether a message with envelope `e` from `sender` is matched natively: a
  // collective envelope whose group and caller's tag fit their fields, from a
  // rank of the world (and a kind as the calls make them, which always fits).
  constexpr bool fits(const Envelope& e, int sender) const noexcept {
    const MessageKind& k = e.kind;
    const int64_t user_tag = collective_user_tag(e.tag);
    return (e.context % 2) == 1 && e.context / 2 < (1U << kGroupBits) && e.tag >= 0 && user_tag < (1 << kTagBits) &&
           sender >= 0 && sender < (1 << sender_bits_) && k.op != MessageOp::P2P && k.op <= kLastMessageOp &&
           (k.dtype == kRawBytes || k.dtype < kNumDTypes) && k.reduce < (1U << kReduceBits) && k.root >= -1 &&
           static_cast<int64_t>(k.root) + 1 < (int64_t{1} << root_bits_);
  }

  // The tag a message with envelope `e` from `sender` is sent with; nullopt when
  // it does not fit.
  constexpr std::optional<uint64_t> tag_of(const Envelope& e, int sender) const noexcept {
    if (!fits(e, sender)) return std::nullopt;
    return stream_bits(e, sender) | kind_bits(e.kind);
  }
  // A receive's tag and mask for envelope `e` from `source` (kAnySource: the
  // sender is left out of the mask too), for an envelope that fits.
  struct Match {
    uint64_t tag;
    uint64_t mask;
  };
  constexpr Match match(const Envelope& e, int source) const noexcept {
    if (source == kAnySource) return {stream_bits(e, 0), match_mask() & ~field(sender_bits_, kMatchedBits)};
    return {stream_bits(e, source), match_mask()};
  }

  constexpr bool is_collective(uint64_t tag) const noexcept { return (tag & marker()) == marker(); }
  constexpr int sender_of(uint64_t tag) const noexcept {
    return static_cast<int>((tag >> kMatchedBits) & ((uint64_t{1} << sender_bits_) - 1));
  }

  // The envelope of a message with tag `tag` that matched a receive posted with
  // `posted`: the receive's own when the kind bits agree, else the kind the bits
  // say (its count kUnnamedCount when it was too large for its field).
  constexpr Envelope arrival(const Envelope& posted, uint64_t tag) const noexcept {
    Envelope got = posted;
    if ((tag & kind_mask()) == kind_bits(posted.kind)) return got;
    uint64_t bits = tag >> kind_shift();
    got.kind.op = static_cast<MessageOp>(take(bits, kOpBits));
    const auto dtype = static_cast<uint8_t>(take(bits, kDTypeBits));
    got.kind.dtype = dtype == kRawBytesCode ? kRawBytes : dtype;
    got.kind.reduce = static_cast<uint8_t>(take(bits, kReduceBits));
    got.kind.root = static_cast<int32_t>(take(bits, root_bits_)) - 1;
    const uint64_t count = take(bits, count_bits_);
    got.kind.count = count < named_counts() ? count : kUnnamedCount;
    return got;
  }

  // The kind field of a tag (the bits kind_mask() keeps).
  constexpr uint64_t kind_bits(const MessageKind& k) const noexcept {
    const uint64_t dtype = k.dtype == kRawBytes ? kRawBytesCode : k.dtype;
    uint64_t v = count_code(k.count);
    v = (v << root_bits_) | static_cast<uint64_t>(k.root + 1);
    v = (v << kReduceBits) | k.reduce;
    v = (v << kDTypeBits) | dtype;
    v = (v << kOpBits) | static_cast<uint64_t>(k.op);
    return v << kind_shift();
  }

 private:
  static constexpr int kMatchedBits = kSeqBits + kTagBits + kGroupBits;  // below the sender

  constexpr CollectiveTagLayout(int usable, int sender_bits, int root_bits, int count_bits)
      : usable_(usable), sender_bits_(sender_bits), root_bits_(root_bits), count_bits_(count_bits) {}
  static constexpr uint64_t field(int bits, int shift) noexcept {
    return (bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1) << shift;
  }
  static constexpr uint64_t take(uint64_t& bits, int n) noexcept {
    const uint64_t v = bits & ((uint64_t{1} << n) - 1);
    bits >>= n;
    return v;
  }
  constexpr int kind_shift() const noexcept { return kMatchedBits + sender_bits_; }
  constexpr uint64_t stream_bits(const Envelope& e, int sender) const noexcept {
    const uint64_t seq = collective_sequence(e.tag) & ((uint64_t{1} << kSeqBits) - 1);
    const auto user_tag = static_cast<uint64_t>(collective_user_tag(e.tag));
    return marker() | (static_cast<uint64_t>(sender) << kMatchedBits) |
           (static_cast<uint64_t>(e.context / 2) << (kSeqBits + kTagBits)) | (user_tag << kSeqBits) | seq;
  }
  // A count below named_counts() as itself; a larger one as the top bit over a
  // hash of it (splitmix64's finalizer), so most unequal large counts still differ.
  constexpr uint64_t count_code(uint64_t count) const noexcept {
    if (count < named_counts()) return count;
    uint64_t z = count + 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return named_counts() | (z & (named_counts() - 1));
  }

  int usable_;
  int sender_bits_;
  int root_bits_;
  int count_bits_;
};

// With 64 bits in a world of 4: the count field holds 22 bits (counts below 2^21
// named), and the fields tile bits 0..61 under the two marker bits.
namespace collective_tag_check {
inline constexpr CollectiveTagLayout kLayout64 = *CollectiveTagLayout::make(64, 4);
static_assert(kLayout64.count_bits() == 22 && kLayout64.sender_bits() == 2 && kLayout64.root_bits() == 3);
static_assert((kLayout64.match_mask() | kLayout64.kind_mask()) == ~uint64_t{0});
static_assert((kLayout64.match_mask() & kLayout64.kind_mask()) == 0);
}  // namespace collective_tag_check

}  // namespace thd::detail::pipe
