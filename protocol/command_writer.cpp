#include "protocol/command_writer.h"

#include <array>
#include <cstring>

#include "tensor/check.h"

namespace thd::protocol {

namespace {

static_assert(FLATBUFFERS_LITTLEENDIAN, "tables are written in host order");
static_assert(sizeof(fb::Scalar) == 24, "Scalar: kind, i, d");

using flatbuffers::soffset_t;
using flatbuffers::uoffset_t;
using flatbuffers::voffset_t;

// The tables' layouts: byte offsets from a table's start, where its vtable's
// soffset is. Every field is present. A command is one block: the Command table
// at an 8-aligned place, then its op's table at 4 past an 8-aligned place (an
// offset points to higher addresses), so that each 8-byte field is 8-aligned and
// no padding sits between the soffset and the fields. The Command of the default
// stream leaves its stream out (as the generated builder leaves out a default).
constexpr uint32_t kCommandSize = 20;        // op offset @4, id @8, op_type @16
constexpr uint32_t kStreamCommandSize = 28;  // op offset @4, id @8, stream @16, op_type @20
constexpr uint32_t kUnarySize = 21;          // out @4, a @12, op @20
constexpr uint32_t kBinarySize = 29;         // out @4, a @12, b @20, op @28
constexpr uint32_t kScalarSize = 52;         // out @4, a @12, op @20, reverse @21, b (Scalar) @28

// The vtables: their own size, the table's, then each field's offset, in the
// schema's field order.
constexpr std::array<voffset_t, 5> kCommandVtable{10, kCommandSize, 8, 16, 4};             // id, op_type, op
constexpr std::array<voffset_t, 6> kStreamCommandVtable{12, kStreamCommandSize, 8, 20, 4, 16};  // + stream
constexpr std::array<voffset_t, 5> kUnaryVtable{10, kUnarySize, 4, 20, 12};                // out, op, a
constexpr std::array<voffset_t, 6> kBinaryVtable{12, kBinarySize, 4, 28, 12, 20};          // out, op, a, b
constexpr std::array<voffset_t, 7> kScalarVtable{14, kScalarSize, 4, 20, 12, 28, 21};      // out, op, a, b, reverse
enum Kind : size_t { kCommand, kStreamCommand, kUnary, kBinary, kScalar };

template <size_t N>
void write_vtable(flatbuffers::FlatBufferBuilder& b, const std::array<voffset_t, N>& vtable,
                  flatbuffers::uoffset_t& at) {
  b.Align(sizeof(voffset_t));
  b.PushBytes(reinterpret_cast<const uint8_t*>(vtable.data()), sizeof(vtable));
  at = b.GetSize();
}

template <typename T>
void put(uint8_t* at, T value) {
  std::memcpy(at, &value, sizeof(T));
}

}  // namespace

flatbuffers::Offset<void> ElementwiseCommand::build(flatbuffers::FlatBufferBuilder& b) const {
  switch (type) {
    case fb::Op::Unary: return fb::CreateUnary(b, out, static_cast<fb::UnaryOp>(op), a).Union();
    case fb::Op::Binary: return fb::CreateBinary(b, out, static_cast<fb::BinaryOp>(op), a, this->b).Union();
    case fb::Op::BinaryScalar:
      return fb::CreateBinaryScalar(b, out, static_cast<fb::BinaryOp>(op), a, &scalar, reverse).Union();
    default: THD_THROW(ValueError, "CommandWriter", "op type {} is not an elementwise op", static_cast<int>(type));
  }
}

flatbuffers::Offset<fb::Command> CommandWriter::write(flatbuffers::FlatBufferBuilder& b, uint64_t id,
                                                      uint32_t stream, const ElementwiseCommand& c) {
  uint32_t size = 0;
  Kind kind = kCommand;
  switch (c.type) {
    case fb::Op::Unary: size = kUnarySize, kind = kUnary; break;
    case fb::Op::Binary: size = kBinarySize, kind = kBinary; break;
    case fb::Op::BinaryScalar: size = kScalarSize, kind = kScalar; break;
    default: THD_THROW(ValueError, "CommandWriter", "op type {} is not an elementwise op", static_cast<int>(c.type));
  }
  const Kind command_kind = stream == 0 ? kCommand : kStreamCommand;
  if (vtables_[command_kind] == 0) {
    if (stream == 0) write_vtable(b, kCommandVtable, vtables_[command_kind]);
    else write_vtable(b, kStreamCommandVtable, vtables_[command_kind]);
  }
  if (vtables_[kind] == 0) {
    switch (kind) {
      case kUnary: write_vtable(b, kUnaryVtable, vtables_[kind]); break;
      case kBinary: write_vtable(b, kBinaryVtable, vtables_[kind]); break;
      default: write_vtable(b, kScalarVtable, vtables_[kind]); break;
    }
  }
  const uint32_t command_size = stream == 0 ? kCommandSize : kStreamCommandSize;
  const uint32_t n = command_size + size;
  // Locations count from the buffer's end, as FlatBuffers counts them: the
  // block's first byte, the Command's start, lands at an 8-aligned one.
  b.TrackMinAlign(8);
  b.Pad((8 - (b.GetSize() + n) % 8) % 8);
  const uoffset_t command_at = b.GetSize() + n;
  const uoffset_t op_at = command_at - command_size;
  auto soffset_to = [&](uoffset_t table_at, Kind vtable) {
    return static_cast<soffset_t>(static_cast<int64_t>(vtables_[vtable]) - static_cast<int64_t>(table_at));
  };
  alignas(8) std::array<uint8_t, kStreamCommandSize + kScalarSize> block{};
  uint8_t* cmd = block.data();
  put(cmd, soffset_to(command_at, command_kind));
  put<uoffset_t>(cmd + 4, command_size - 4);
  put(cmd + 8, id);
  if (stream == 0) {
    put(cmd + 16, static_cast<uint8_t>(c.type));
  } else {
    put(cmd + 16, stream);
    put(cmd + 20, static_cast<uint8_t>(c.type));
  }
  uint8_t* t = cmd + command_size;
  put(t, soffset_to(op_at, kind));
  put(t + 4, c.out);
  put(t + 12, c.a);
  switch (kind) {
    case kUnary: put(t + 20, c.op); break;
    case kBinary:
      put(t + 20, c.b);
      put(t + 28, c.op);
      break;
    default:
      put(t + 20, c.op);
      put(t + 21, static_cast<uint8_t>(c.reverse));
      put(t + 28, c.scalar);
      break;
  }
  b.PushBytes(block.data(), n);
  return flatbuffers::Offset<fb::Command>(command_at);
}

}  // namespace thd::protocol
