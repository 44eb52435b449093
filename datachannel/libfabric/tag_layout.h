// How the pipe's (sender rank, tag) pairs and its own goodbye messages are packed
// into libfabric's 64-bit tags.
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

namespace thd::detail::libfabric {

class TagLayout {
 public:
  // The pipe needs at least MPI's minimum of tags (2^15) to serve PipeTransport.
  static constexpr int kMinTagBits = 15;
  static constexpr int kMaxTagBits = 32;

  // The bits a provider matches on, from its mem_tag_format: the highest set bit
  // bounds them (FI_TAG_GENERIC, 0xaaaa...aaaa, is 64 bits); 0 means it does not
  // say, taken as all 64.
  static int usable_bits(uint64_t mem_tag_format) { return mem_tag_format == 0 ? 64 : std::bit_width(mem_tag_format); }

  // The layout for a world of `world_size` ranks over `usable` tag bits; nullopt
  // when fewer than kMinTagBits would be left for the pipe's tags.
  static std::optional<TagLayout> make(int usable, int world_size) {
    const int rank_bits = std::max(1, static_cast<int>(std::bit_width(static_cast<uint32_t>(world_size - 1))));
    const int tag_bits = std::min(kMaxTagBits, usable - 1 - rank_bits);
    if (tag_bits < kMinTagBits) return std::nullopt;
    return TagLayout(usable, rank_bits, tag_bits);
  }

  uint32_t max_tag() const noexcept { return tag_bits_ == 32 ? UINT32_MAX : (uint32_t{1} << tag_bits_) - 1; }
  int tag_bits() const noexcept { return tag_bits_; }
  int rank_bits() const noexcept { return rank_bits_; }

  uint64_t data_tag(int sender, uint32_t tag) const noexcept {
    return (static_cast<uint64_t>(sender) << tag_bits_) | tag;
  }
  uint64_t goodbye_tag(int sender) const noexcept { return goodbye_flag() | data_tag(sender, 0); }
  // A receive of goodbye_tag(0) with this ignore mask matches every rank's goodbye.
  uint64_t goodbye_ignore() const noexcept { return ((uint64_t{1} << rank_bits_) - 1) << tag_bits_; }
  int sender_of(uint64_t fabric_tag) const noexcept {
    return static_cast<int>((fabric_tag >> tag_bits_) & ((uint64_t{1} << rank_bits_) - 1));
  }

 private:
  TagLayout(int usable, int rank_bits, int tag_bits) : usable_(usable), rank_bits_(rank_bits), tag_bits_(tag_bits) {}
  uint64_t goodbye_flag() const noexcept { return uint64_t{1} << (usable_ - 1); }

  int usable_;
  int rank_bits_;
  int tag_bits_;
};

}  // namespace thd::detail::libfabric
