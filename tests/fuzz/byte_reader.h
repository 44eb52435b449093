// Reads a fuzz input front to back: fixed-size little-endian integers and byte
// runs. Past the end every read yields zeros or an empty run, so a target never
// needs to check lengths before it reads (a short input is simply a shorter run).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace thd::fuzz {

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> data) : data_(data) {}

  bool empty() const { return pos_ >= data_.size(); }
  size_t remaining() const { return data_.size() - pos_; }

  uint8_t u8() { return static_cast<uint8_t>(le(1)); }
  uint16_t u16() { return static_cast<uint16_t>(le(2)); }
  uint32_t u32() { return static_cast<uint32_t>(le(4)); }
  uint64_t u64() { return le(8); }

  // The next `n` bytes, or fewer at the end.
  std::span<const uint8_t> take(size_t n) {
    const size_t k = std::min(n, remaining());
    auto out = data_.subspan(pos_, k);
    pos_ += k;
    return out;
  }
  std::span<const uint8_t> rest() { return take(remaining()); }

 private:
  uint64_t le(size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n && !empty(); ++i) v |= uint64_t{data_[pos_++]} << (8 * i);
    return v;
  }

  std::span<const uint8_t> data_;
  size_t pos_ = 0;
};

}  // namespace thd::fuzz
