// How the algorithms cut a buffer: into one block per rank (rings, all_gather,
// reduce_scatter) and each block into chunks (pipelining). Every rank computes
// the same cuts from the same arguments, so both ends of every message agree on
// its size without telling each other.
#pragma once

#include <thd/tensor.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace thd::detail {

// `count` elements of `elem` bytes split into `parts` runs whose sizes differ by
// at most one element, the longer ones first.
struct Split {
  size_t count = 0;
  size_t parts = 1;

  size_t base() const { return count / parts; }
  size_t longer() const { return count % parts; }  // how many runs have base() + 1
  size_t size(size_t i) const { return base() + (i < longer() ? 1 : 0); }
  size_t begin(size_t i) const { return i * base() + std::min(i, longer()); }
  size_t largest() const { return base() + (longer() > 0 ? 1 : 0); }
};

// One block per rank, and every block in the same number of chunks of at most
// about chunk_bytes, so that chunk k of one block and chunk k of another travel at
// the same point of a pipeline.
class BlockLayout {
 public:
  BlockLayout(size_t count, size_t elem, int blocks, size_t chunk_bytes)
      : blocks_{count, static_cast<size_t>(blocks)}, elem_(elem) {
    const size_t largest_bytes = blocks_.largest() * elem;
    const size_t per_chunk = std::max<size_t>(chunk_bytes, elem);
    chunks_ = std::max<size_t>(1, (largest_bytes + per_chunk - 1) / per_chunk);
  }

  size_t chunks() const { return chunks_; }
  size_t elem() const { return elem_; }
  // Byte offset and size of block b, from the start of the buffer.
  size_t block_offset(int b) const { return blocks_.begin(static_cast<size_t>(b)) * elem_; }
  size_t block_bytes(int b) const { return blocks_.size(static_cast<size_t>(b)) * elem_; }
  size_t largest_block_bytes() const { return blocks_.largest() * elem_; }
  // Chunk k of block b: byte offset within the block, and byte size (may be 0).
  size_t chunk_offset(int b, size_t k) const { return chunk_split(b).begin(k) * elem_; }
  size_t chunk_bytes(int b, size_t k) const { return chunk_split(b).size(k) * elem_; }
  size_t largest_chunk_bytes() const { return Split{blocks_.largest(), chunks_}.largest() * elem_; }

 private:
  Split chunk_split(int b) const { return Split{blocks_.size(static_cast<size_t>(b)), chunks_}; }

  Split blocks_;
  size_t elem_;
  size_t chunks_ = 1;
};

// (a mod n) for a possibly negative a.
inline int ring_index(int a, int n) { return ((a % n) + n) % n; }

// Scratch bytes from the caching allocator (cheap to take and give back).
inline Tensor scratch_bytes(size_t nbytes) { return Tensor::empty({static_cast<int64_t>(nbytes)}, kUInt8); }
inline uint8_t* bytes_of(const Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }

inline std::span<uint8_t> span_of(void* p, size_t n) { return {static_cast<uint8_t*>(p), n}; }
inline std::span<const uint8_t> span_of(const void* p, size_t n) { return {static_cast<const uint8_t*>(p), n}; }

}  // namespace thd::detail
