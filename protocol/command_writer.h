// The commands of the hot elementwise ops (Unary, Binary, BinaryScalar) written
// into a CommandBatch's builder in one piece: each a Command table and its op's
// table with every field present at a fixed place, sharing vtables written once per
// buffer. Readers see ordinary Command tables (the same bytes a FlatBuffers reader
// and verifier accept); the writer skips what makes the generated builders slow on
// the master's hot path: the per-field bookkeeping, EndTable's search for an equal
// vtable, and the std::function an op's table is built through.
#pragma once

#include <array>
#include <cstdint>

#include "protocol/codec.h"

namespace thd::protocol {

// One elementwise command: out == 0 is the in-place form (the result lands in a).
struct ElementwiseCommand {
  fb::Op type = fb::Op::Binary;  // Unary, Binary or BinaryScalar
  uint8_t op = 0;                // the fb::UnaryOp or fb::BinaryOp
  uint64_t out = 0;
  uint64_t a = 0;
  uint64_t b = 0;        // Binary's second tensor
  fb::Scalar scalar{};   // BinaryScalar's number
  bool reverse = false;  // BinaryScalar: scalar op tensor

  // The op's table built by FlatBuffers' generated code (a graph capture's builder,
  // and the reference the writer's bytes are tested against).
  flatbuffers::Offset<void> build(flatbuffers::FlatBufferBuilder& b) const;
};

class CommandWriter {
 public:
  // Appends the command (op id `id`, on `stream`) to `b`'s buffer. `b` must be the
  // builder of every earlier call since the last reset(), not inside a table.
  flatbuffers::Offset<fb::Command> write(flatbuffers::FlatBufferBuilder& b, uint64_t id, uint32_t stream,
                                         const ElementwiseCommand& c);
  // The builder was cleared: the next write puts the vtables in again.
  void reset() { vtables_ = {}; }

 private:
  // Where each table kind's vtable is in the buffer (its distance from the
  // buffer's end, as FlatBuffers counts; 0 while not written): Command (without
  // and with a stream), Unary, Binary, BinaryScalar. Each is written when a batch
  // first needs it.
  std::array<flatbuffers::uoffset_t, 5> vtables_{};
};

}  // namespace thd::protocol
