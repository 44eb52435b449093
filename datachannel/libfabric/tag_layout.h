// How the pipe's (sender rank, tag) pairs and its own goodbye messages are packed
// into libfabric's 64-bit tags (TagLayout), and thd's point-to-point messages
// matched by libfabric itself (NativeLayout, further below).
//
//   bit  usable-1              : goodbye flag (a rank closing its endpoint)
//   bits [tag_bits, +rank_bits): the sender's rank
//   bits [0, tag_bits)         : the pipe's tag (tag_bits = 32 when the provider
//                                matches on 64 bits, as tcp;ofi_rxm and shm do)
//
// With a 64-bit tag that is (sender << 32) | tag. The sender's rank is part of
// every tag so a receive matches its peer even on providers without
// FI_DIRECTED_RECV, where the receive's source address is FI_ADDR_UNSPEC.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>

#include <thd/datachannel.h>
#include <thd/dtype.h>

#include "datachannel/envelope.h"

namespace thd::detail::libfabric {

class TagLayout {
 public:
  // The pipe needs at least MPI's minimum of tags (2^15) to serve PipeTransport.
  static constexpr int kMinTagBits = 15;
  static constexpr int kMaxTagBits = 32;

  // The bits a provider matches on, from its mem_tag_format: the highest set bit
  // bounds them (FI_TAG_GENERIC, 0xaaaa...aaaa, is 64 bits); 0 means it does not
  // say, taken as all 64.
  static constexpr int usable_bits(uint64_t mem_tag_format) {
    return mem_tag_format == 0 ? 64 : std::bit_width(mem_tag_format);
  }

  // The layout for a world of `world_size` ranks over `usable` tag bits; nullopt
  // when fewer than kMinTagBits would be left for the pipe's tags.
  static constexpr std::optional<TagLayout> make(int usable, int world_size) {
    const int rank_bits = std::max(1, static_cast<int>(std::bit_width(static_cast<uint32_t>(world_size - 1))));
    const int tag_bits = std::min(kMaxTagBits, usable - 1 - rank_bits);
    if (tag_bits < kMinTagBits) return std::nullopt;
    return TagLayout(usable, rank_bits, tag_bits);
  }

  constexpr uint32_t max_tag() const noexcept { return tag_bits_ == 32 ? UINT32_MAX : (uint32_t{1} << tag_bits_) - 1; }
  constexpr int usable() const noexcept { return usable_; }
  constexpr int tag_bits() const noexcept { return tag_bits_; }
  constexpr int rank_bits() const noexcept { return rank_bits_; }

  constexpr uint64_t data_tag(int sender, uint32_t tag) const noexcept {
    return (static_cast<uint64_t>(sender) << tag_bits_) | tag;
  }
  constexpr uint64_t goodbye_tag(int sender) const noexcept { return goodbye_flag() | data_tag(sender, 0); }
  // A receive of goodbye_tag(0) with this ignore mask matches every rank's goodbye.
  constexpr uint64_t goodbye_ignore() const noexcept { return ((uint64_t{1} << rank_bits_) - 1) << tag_bits_; }
  constexpr int sender_of(uint64_t fabric_tag) const noexcept {
    return static_cast<int>((fabric_tag >> tag_bits_) & ((uint64_t{1} << rank_bits_) - 1));
  }

 private:
  constexpr TagLayout(int usable, int rank_bits, int tag_bits)
      : usable_(usable), rank_bits_(rank_bits), tag_bits_(tag_bits) {}
  constexpr uint64_t goodbye_flag() const noexcept { return uint64_t{1} << (usable_ - 1); }

  int usable_;
  int rank_bits_;
  int tag_bits_;
};

// ---- thd's own point-to-point messages, matched by libfabric itself ----
//
// A message whose envelope fits is sent with every field its receive matches on,
// and its kind, in the tag. Over the provider's `usable` tag bits (U):
//
//   bit  U-1             : 0 (the goodbye flag of the pipe's layout)
//   bit  U-2             : 1 (the native bit)
//   5 bits below it      : the payload's dtype (0..kNumDTypes-1), or kRawBytesCode
//   sender_bits below    : the sender's world rank (as many bits as the pipe's layout)
//   group_bits below     : the group id (the envelope's p2p context / 2)
//   tag_bits from bit 0  : the caller's tag (up to 31 bits: every int tag >= 0)
//
// With 64 bits and a world of 4: tag 0..30, group 31..54, sender 55..56, dtype
// 57..61, native 62. A receive matches on everything but the dtype (and the
// sender, for kAnySource) and checks the dtype and the length when the message
// lands: a point-to-point message's kind is its dtype and element count.
// Collectives have a layout of their own (pipe/collective_tag.h), marked by bits
// U-1 and U-2 both set, which no tag here has (the goodbye flag clears the native
// bit, a point-to-point tag the goodbye flag). An envelope that does not fit (a tag or group past its field) is refused by
// fits(), never folded into another's bits: it travels on the pipe's control tag,
// as every message of its (context, tag) does.
class NativeLayout {
 public:
  static constexpr int kDTypeBits = 5;
  static constexpr int kMaxTagBits = 31;
  static constexpr int kMinTagBits = 15;
  static constexpr int kMinGroupBits = 8;
  static constexpr int kMaxGroupBits = 32;
  static constexpr uint32_t kRawBytesCode = (1U << kDTypeBits) - 1;
  static_assert(kNumDTypes < static_cast<int>(kRawBytesCode), "every dtype and raw bytes need a code of their own");

  // The layout beside `pipe` (the pipe's own layout over the same bits); nullopt
  // when the bits do not hold it: the pipe's tags must keep clear of the native
  // bit, and at least kMinTagBits of tag and kMinGroupBits of group must be left.
  static constexpr std::optional<NativeLayout> make(const TagLayout& pipe) {
    const int usable = pipe.usable();
    if (pipe.tag_bits() + pipe.rank_bits() > usable - 2) return std::nullopt;
    const int sender_bits = pipe.rank_bits();
    const int left = usable - 2 - kDTypeBits - sender_bits;
    const int tag_bits = std::min(kMaxTagBits, left - kMinGroupBits);
    if (tag_bits < kMinTagBits) return std::nullopt;
    const int group_bits = std::min(kMaxGroupBits, left - tag_bits);
    return NativeLayout(usable, sender_bits, group_bits, tag_bits);
  }

  struct Fields {
    uint32_t dtype = kRawBytesCode;  // a DType's value, or kRawBytesCode
    int sender = 0;
    uint32_t group = 0;
    int64_t tag = 0;
    bool operator==(const Fields&) const = default;
  };

  constexpr int usable() const noexcept { return usable_; }
  constexpr int tag_bits() const noexcept { return tag_bits_; }
  constexpr int group_bits() const noexcept { return group_bits_; }
  constexpr int sender_bits() const noexcept { return sender_bits_; }
  constexpr int64_t max_tag() const noexcept { return (int64_t{1} << tag_bits_) - 1; }
  constexpr uint64_t max_group() const noexcept { return (uint64_t{1} << group_bits_) - 1; }
  constexpr int64_t max_sender() const noexcept { return (int64_t{1} << sender_bits_) - 1; }
  constexpr uint64_t native_bit() const noexcept { return uint64_t{1} << (usable_ - 2); }
  constexpr uint64_t dtype_mask() const noexcept { return field(kDTypeBits, dtype_shift()); }
  constexpr uint64_t sender_mask() const noexcept { return field(sender_bits_, sender_shift()); }
  constexpr uint64_t group_mask() const noexcept { return field(group_bits_, tag_bits_); }
  constexpr uint64_t tag_mask() const noexcept { return field(tag_bits_, 0); }

  // Whether a message with envelope `e` from `sender` is matched natively.
  constexpr bool fits(const Envelope& e, int sender) const noexcept {
    const MessageKind& k = e.kind;
    return (e.context % 2) == 0 && e.context / 2 <= max_group() && e.tag >= 0 && e.tag <= max_tag() &&
           k.op == MessageOp::P2P && k.reduce == 0 && k.root == -1 &&
           (k.dtype == detail::kRawBytes || k.dtype < kNumDTypes) && sender >= 0 && sender <= max_sender();
  }

  constexpr uint64_t pack(const Fields& f) const noexcept {
    return native_bit() | (static_cast<uint64_t>(f.dtype) << dtype_shift()) |
           (static_cast<uint64_t>(static_cast<uint32_t>(f.sender)) << sender_shift()) |
           (static_cast<uint64_t>(f.group) << tag_bits_) | static_cast<uint64_t>(f.tag);
  }
  constexpr Fields unpack(uint64_t tag) const noexcept {
    return {static_cast<uint32_t>((tag & dtype_mask()) >> dtype_shift()),
            static_cast<int>((tag & sender_mask()) >> sender_shift()),
            static_cast<uint32_t>((tag & group_mask()) >> tag_bits_), static_cast<int64_t>(tag & tag_mask())};
  }
  // The dtype field's code for a message kind's dtype.
  static constexpr uint32_t dtype_code(uint8_t dtype) noexcept {
    return dtype == detail::kRawBytes ? kRawBytesCode : static_cast<uint32_t>(dtype);
  }

  // The tag a message with envelope `e` from `sender` is sent with; nullopt when
  // it does not fit.
  constexpr std::optional<uint64_t> tag_of(const Envelope& e, int sender) const noexcept {
    if (!fits(e, sender)) return std::nullopt;
    return pack({dtype_code(e.kind.dtype), sender, e.context / 2, e.tag});
  }
  // A receive's tag and the bits it matches on (mask: libfabric's ignore is its
  // complement) for envelope `e` from `source` (kAnySource allowed): everything
  // but the dtype, and but the sender for kAnySource.
  struct Match {
    uint64_t tag;
    uint64_t mask;
  };
  constexpr Match match(const Envelope& e, int source) const noexcept {
    const bool any = source == kAnySource;
    const uint64_t tag = pack({0, any ? 0 : source, e.context / 2, e.tag});
    const uint64_t mask = ~dtype_mask() & (any ? ~sender_mask() : ~uint64_t{0});
    return {tag, mask};
  }

 private:
  constexpr NativeLayout(int usable, int sender_bits, int group_bits, int tag_bits)
      : usable_(usable), sender_bits_(sender_bits), group_bits_(group_bits), tag_bits_(tag_bits) {}
  static constexpr uint64_t field(int bits, int shift) noexcept { return ((uint64_t{1} << bits) - 1) << shift; }
  constexpr int sender_shift() const noexcept { return tag_bits_ + group_bits_; }
  constexpr int dtype_shift() const noexcept { return usable_ - 2 - kDTypeBits; }

  int usable_;
  int sender_bits_;
  int group_bits_;
  int tag_bits_;
};

// With the 64 bits tcp;ofi_rxm and shm match on, in a world of 4: the fields tile
// bits 0..62 exactly, and the pipe's own tags (bits 0..33, goodbye flag 63) never
// set the native bit.
namespace native_layout_check {
inline constexpr TagLayout kPipe64 = *TagLayout::make(64, 4);
inline constexpr NativeLayout kNative64 = *NativeLayout::make(kPipe64);
static_assert(kNative64.tag_bits() == 31 && kNative64.group_bits() == 24 && kNative64.sender_bits() == 2);
static_assert((kNative64.tag_mask() | kNative64.group_mask() | kNative64.sender_mask() | kNative64.dtype_mask() |
               kNative64.native_bit()) == (uint64_t{1} << 63) - 1);
static_assert((kNative64.tag_mask() & kNative64.group_mask()) == 0 &&
              (kNative64.group_mask() & kNative64.sender_mask()) == 0 &&
              (kNative64.sender_mask() & kNative64.dtype_mask()) == 0);
static_assert((kPipe64.data_tag(3, UINT32_MAX) & kNative64.native_bit()) == 0);
static_assert((kPipe64.goodbye_tag(3) & kNative64.native_bit()) == 0);
}  // namespace native_layout_check

}  // namespace thd::detail::libfabric
