// The protocol's constants and the conversions between thd's types and the
// generated FlatBuffers types (docs/protocol.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <thd/dtype.h>
#include <thd/error.h>
#include <thd/scalar.h>
#include <thd/tensor.h>

#include "thd_protocol_generated.h"

namespace thd::protocol {

// Bumped on every incompatible schema change; the HELLO checks it.
inline constexpr uint32_t kVersion = 7;

// Limits a worker enforces before it reads a message.
inline constexpr size_t kMaxMessageBytes = size_t{64} << 20;
inline constexpr size_t kMaxCommandsPerBatch = size_t{1} << 20;
inline constexpr int64_t kMaxDims = 64;
// Streams one session may have on a node at once, destroyed ones still running
// their work included: each runs on a thread of its own.
inline constexpr size_t kMaxStreamsPerNode = 4096;
inline constexpr size_t kMaxVerifierDepth = 32;
inline constexpr size_t kMaxVerifierTables = size_t{8} << 20;

// DataChannel tags of the runtime's traffic. Fetch and worker-to-worker transfer
// tags are drawn per transfer from their own ranges, so they never collide.
inline constexpr int64_t kCommandTag = 1;  // master -> worker messages
inline constexpr int64_t kReplyTag = 2;    // worker -> master messages
inline constexpr int64_t kUploadTag = 3;   // master -> worker tensor bytes, in Upload order
inline constexpr int64_t kFetchTagBase = int64_t{1} << 40;
inline constexpr int64_t kTransferTagBase = int64_t{2} << 40;
inline constexpr int64_t kTagRange = int64_t{1} << 40;
// Where a worker may send a fetch's bytes or a sync's answer.
inline constexpr bool is_transfer_tag(int64_t tag) {
  return tag >= kTransferTagBase && tag < kTransferTagBase + kTagRange;
}
inline constexpr bool is_fetch_tag(int64_t tag) { return tag >= kFetchTagBase && tag < kFetchTagBase + kTagRange; }

// A message that does not pass verification: the worker answers it with an error,
// it never reads it.
class ProtocolError : public ValueError {
  using ValueError::ValueError;
};

// Throws ProtocolError (naming what was wrong) unless `bytes` is a well-formed
// Message of this protocol version within the limits above.
const fb::Message& verify_message(std::span<const uint8_t> bytes, const char* who);

fb::DType to_fb(DType dtype);
// ProtocolError for a value outside the enum (a hostile or corrupt message).
DType from_fb(fb::DType dtype);

fb::Scalar to_fb(const Scalar& s);
Scalar from_fb(const fb::Scalar& s);

// The highest GPU index a message may name: far above any machine's GPU count, so a
// node's own check (which names how many it has) is what refuses a real index.
inline constexpr int kMaxDeviceIndex = 1 << 16;
fb::Device to_fb(Device device);
// A device field of a message: absent is the CPU; ProtocolError for a type outside
// the enum or a CUDA index outside 0..kMaxDeviceIndex.
Device from_fb(const fb::Device* device);

fb::ErrorKind to_fb(ErrorKind kind);
// A kind this build does not know (a newer peer's) reads as Generic: an error
// report is never refused for its kind.
ErrorKind from_fb(fb::ErrorKind kind);

// The elements of a vector of scalars from a message (empty when absent). The
// verifier checks that a vector's length is aligned, not its elements: a hostile
// message may place 8-byte elements anywhere, so they are copied out byte for byte
// rather than read in place (a misaligned read is undefined behaviour). Read every
// vector of 8-byte scalars (ids, shapes, dims) through this.
template <typename T>
std::vector<T> scalars_of(const flatbuffers::Vector<T>* v) {
  static_assert(std::is_arithmetic_v<T> && FLATBUFFERS_LITTLEENDIAN, "scalars in host order");
  std::vector<T> out;
  if (v == nullptr || v->size() == 0) return out;
  out.resize(v->size());
  std::memcpy(out.data(), v->Data(), out.size() * sizeof(T));
  return out;
}

// A shape from a message: ProtocolError when missing where required, longer than
// kMaxDims, or holding negative sizes.
Shape shape_from_fb(const flatbuffers::Vector<int64_t>* shape, const char* what);

// "add", "index_select": the lower-case name of an op for error reports.
std::string op_name(const fb::Command& command);

}  // namespace thd::protocol
