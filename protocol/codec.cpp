#include "protocol/codec.h"

#include <array>
#include <cctype>

#include <thd/config.h>

#include "protocol/op_table.h"
#include "tensor/check.h"

namespace thd::protocol {

namespace {

// "IndexSelect" -> "index_select"
std::string snake(const char* camel) {
  std::string out;
  for (const char* p = camel; p != nullptr && *p != '\0'; ++p) {
    if (std::isupper(static_cast<unsigned char>(*p))) {
      if (!out.empty()) out += '_';
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
    } else {
      out += *p;
    }
  }
  return out.empty() ? "unknown" : out;
}

std::string maybe_inplace(std::string name, uint64_t out) { return out == 0 ? name + "_" : name; }

// The snake-case names of an enum's values, indexed by value: made once from the
// schema's own names, which the generated code lists in value order from 0.
template <typename E, size_t N>
std::array<std::string, N> snake_names(const E (&values)[N], const char* (*schema_name)(E)) {
  std::array<std::string, N> names;
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(values[i]) != i) {
      THD_THROW(protocol::ProtocolError, "protocol", "schema enum value {} lies at index {}", static_cast<int>(values[i]), i);
    }
    names[i] = snake(schema_name(values[i]));
  }
  return names;
}

template <typename E, size_t N>
const char* name_in(const std::array<std::string, N>& names, E op, const char* family) {
  const auto i = static_cast<size_t>(op);
  if (i >= N) throw_unknown_kind(family, static_cast<int>(op));
  return names[i].c_str();
}

// A batch's frees name where each goes (free_before); a schedule that does not
// say, or points past the batch, or goes back, is refused with the whole batch.
void verify_free_schedule(const fb::CommandBatch& batch, size_t commands, const char* who) {
  const size_t frees = batch.frees() != nullptr ? batch.frees()->size() : 0;
  const size_t places = batch.free_before() != nullptr ? batch.free_before()->size() : 0;
  if (frees != places) {
    THD_THROW(protocol::ProtocolError, who, "batch frees {} tensors but places {} of them (free_before)", frees,
              places);
  }
  uint32_t last = 0;
  for (size_t i = 0; i < places; ++i) {
    const uint32_t at = batch.free_before()->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (at > commands || at < last) {
      THD_THROW(protocol::ProtocolError, who,
                "batch places free {} before command {}: the places must not decrease and lie in 0..{} (its "
                "commands)",
                i, at, commands);
    }
    last = at;
  }
}

}  // namespace

void throw_unknown_kind(const char* family, int value) {
  THD_THROW(protocol::ProtocolError, family, "{} kind {} is not in this protocol version", family, value);
}

const char* op_name(fb::UnaryOp op) {
  static const auto names = snake_names(fb::EnumValuesUnaryOp(), fb::EnumNameUnaryOp);
  return name_in(names, op, "unary");
}

const char* op_name(fb::BinaryOp op) {
  static const auto names = snake_names(fb::EnumValuesBinaryOp(), fb::EnumNameBinaryOp);
  return name_in(names, op, "binary");
}

const fb::Message& verify_message(std::span<const uint8_t> bytes, const char* who) {
  if (bytes.size() > kMaxMessageBytes) {
    THD_THROW(protocol::ProtocolError, who, "message of {} bytes exceeds the limit of {} bytes", bytes.size(),
              kMaxMessageBytes);
  }
  if (bytes.size() < sizeof(flatbuffers::uoffset_t)) {
    THD_THROW(protocol::ProtocolError, who, "message of {} bytes is too short to hold a FlatBuffer", bytes.size());
  }
  flatbuffers::Verifier::Options options;
  options.max_depth = kMaxVerifierDepth;
  options.max_tables = kMaxVerifierTables;
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), options);
  if (!fb::VerifyMessageBuffer(verifier)) {
    THD_THROW(protocol::ProtocolError, who, "message of {} bytes failed FlatBuffers verification (malformed or truncated)",
              bytes.size());
  }
  const fb::Message* message = fb::GetMessage(bytes.data());
  if (message->version() != kVersion) {
    THD_THROW(protocol::ProtocolError, who, "protocol version {} does not match this build's version {}", message->version(),
              kVersion);
  }
  if (message->body_type() == fb::Body::NONE) THD_THROW(protocol::ProtocolError, who, "message has no body");
  // The verifier lets a union's table be absent: a body type without its table is
  // as malformed as no body, and every reader may then take the body as present.
  if (message->body() == nullptr) {
    THD_THROW(protocol::ProtocolError, who, "message names a {} body but carries none",
              fb::EnumNameBody(message->body_type()));
  }
  if (const fb::CommandBatch* batch = message->body_as_CommandBatch()) {
    const size_t commands = batch->commands() != nullptr ? batch->commands()->size() : 0;
    if (commands > kMaxCommandsPerBatch) {
      THD_THROW(protocol::ProtocolError, who, "batch of {} commands exceeds the limit of {}", commands,
                kMaxCommandsPerBatch);
    }
    verify_free_schedule(*batch, commands, who);
  }
  return *message;
}

fb::DType to_fb(DType dtype) { return static_cast<fb::DType>(static_cast<uint8_t>(dtype)); }

DType from_fb(fb::DType dtype) {
  const auto v = static_cast<uint8_t>(dtype);
  if (v >= kNumDTypes) THD_THROW(protocol::ProtocolError, "decode", "dtype code {} is not a thd dtype", v);
  return static_cast<DType>(v);
}

fb::Scalar to_fb(const Scalar& s) {
  switch (s.kind()) {
    case Scalar::Kind::Bool:
      return fb::Scalar(fb::ScalarKind::Bool, s.to_int64(), 0.0);
    case Scalar::Kind::Int:
      return fb::Scalar(fb::ScalarKind::Int, s.to_int64(), 0.0);
    case Scalar::Kind::Float:
      return fb::Scalar(fb::ScalarKind::Float, 0, s.to_double());
  }
  return fb::Scalar();
}

Scalar from_fb(const fb::Scalar& s) {
  switch (s.kind()) {
    case fb::ScalarKind::Bool:
      return Scalar(s.i() != 0);
    case fb::ScalarKind::Int:
      return Scalar(s.i());
    case fb::ScalarKind::Float:
      return Scalar(s.d());
  }
  THD_THROW(protocol::ProtocolError, "decode", "scalar kind {} is not a thd scalar kind", static_cast<int>(s.kind()));
}

fb::Device to_fb(Device device) {
  return device.is_cuda() ? fb::Device(fb::DeviceType::CUDA, device.index()) : fb::Device(fb::DeviceType::CPU, -1);
}

// One enum on the wire and in the API, value for value.
static_assert(static_cast<int>(fb::ErrorKind::MAX) == static_cast<int>(ErrorKind::Cuda));
static_assert(static_cast<int>(fb::ErrorKind::OutOfMemory) == static_cast<int>(ErrorKind::OutOfMemory));
static_assert(static_cast<int>(fb::ErrorKind::NotImplemented) == static_cast<int>(ErrorKind::NotImplemented));

fb::ErrorKind to_fb(ErrorKind kind) { return static_cast<fb::ErrorKind>(kind); }

ErrorKind from_fb(fb::ErrorKind kind) {
  if (kind > fb::ErrorKind::MAX) return ErrorKind::Generic;
  return static_cast<ErrorKind>(kind);
}

Device from_fb(const fb::Device* device) {
  if (device == nullptr) return Device::cpu();
  switch (device->type()) {
    case fb::DeviceType::CPU:
      return Device::cpu();
    case fb::DeviceType::CUDA:
      if (device->index() < 0 || device->index() > kMaxDeviceIndex) {
        THD_THROW(protocol::ProtocolError, "decode", "CUDA device index {} is out of range (0..{})", device->index(),
                  kMaxDeviceIndex);
      }
      return Device::cuda(device->index());
  }
  THD_THROW(protocol::ProtocolError, "decode", "device type {} is not a thd device type",
            static_cast<int>(device->type()));
}

Shape shape_from_fb(const flatbuffers::Vector<int64_t>* shape, const char* what) {
  if (shape == nullptr) return {};
  if (shape->size() > static_cast<size_t>(kMaxDims)) {
    THD_THROW(protocol::ProtocolError, what, "shape has {} dims, more than the limit of {}", shape->size(), kMaxDims);
  }
  Shape out = scalars_of(shape);
  for (int64_t d : out) {
    if (d < 0) THD_THROW(protocol::ProtocolError, what, "shape {} has a negative size", shape_str(out));
  }
  return out;
}

namespace {

// For error reports about a command: "unknown" for a value outside the enum
// rather than a second error.
template <typename E>
std::string known_op_name(E op) {
  return static_cast<size_t>(op) <= static_cast<size_t>(E::MAX) ? op_name(op) : "unknown";
}

}  // namespace

std::string op_name(const fb::Command& c) {
  if (c.op() == nullptr) return "none";  // a union type without its table
  switch (c.op_type()) {
    case fb::Op::NONE:
      return "none";
    case fb::Op::Create:
      return snake(fb::EnumNameCreateKind(c.op_as_Create()->kind()));
    case fb::Op::Upload:
      return "dist_send";
    case fb::Op::Fetch:
      return "get";
    case fb::Op::Free:
      return "free";
    case fb::Op::Sync:
      return "synchronize";
    case fb::Op::ManualSeed:
      return "manual_seed";
    case fb::Op::SendTo:
      return "to_node (send)";
    case fb::Op::RecvFrom:
      return "to_node";
    case fb::Op::Unary:
      return maybe_inplace(known_op_name(c.op_as_Unary()->op()), c.op_as_Unary()->out());
    case fb::Op::Binary:
      return maybe_inplace(known_op_name(c.op_as_Binary()->op()), c.op_as_Binary()->out());
    case fb::Op::BinaryScalar:
      return maybe_inplace(known_op_name(c.op_as_BinaryScalar()->op()), c.op_as_BinaryScalar()->out());
    case fb::Op::Clamp:
      return maybe_inplace("clamp", c.op_as_Clamp()->out());
    case fb::Op::Fill:
      return "fill_";
    case fb::Op::CopyFrom:
      return "copy_";
    case fb::Op::Cast:
      return "to";
    case fb::Op::Reduce:
      return snake(fb::EnumNameReduceKind(c.op_as_Reduce()->kind()));
    case fb::Op::Softmax:
      return c.op_as_Softmax()->log() ? "log_softmax" : "softmax";
    case fb::Op::Matmul:
      return snake(fb::EnumNameMatmulKind(c.op_as_Matmul()->kind()));
    case fb::Op::Addmm:
      return "addmm";
    case fb::Op::ViewOp:
      return c.op_as_ViewOp()->kind() == fb::ViewKind::SqueezeDim
                 ? "squeeze"
                 : snake(fb::EnumNameViewKind(c.op_as_ViewOp()->kind()));
    case fb::Op::IndexOp:
      return snake(fb::EnumNameIndexKind(c.op_as_IndexOp()->kind()));
    case fb::Op::Scatter:
      return maybe_inplace("scatter", c.op_as_Scatter()->out());
    case fb::Op::MaskedFill:
      return maybe_inplace("masked_fill", c.op_as_MaskedFill()->out());
    case fb::Op::Where:
      return "where";
    case fb::Op::Join:
      return snake(fb::EnumNameJoinKind(c.op_as_Join()->kind()));
    case fb::Op::Split:
      return "split";
    case fb::Op::Sort:
      return c.op_as_Sort()->k() < 0 ? "sort" : "topk";
    case fb::Op::Collective:
      return snake(fb::EnumNameCollectiveKind(c.op_as_Collective()->kind()));
    case fb::Op::StreamCreate:
      return "Stream::create";
    case fb::Op::StreamDestroy:
      return "~Stream";
    case fb::Op::EventRecord:
      return "Event::record";
    case fb::Op::EventWait:
    case fb::Op::EventWaitRemote:
      return "Stream::wait";
    case fb::Op::EventNotify:
      return "Stream::wait (notify)";
    case fb::Op::EventQuery:
      return c.op_as_EventQuery()->wait() ? "Event::synchronize" : "Event::query";
    case fb::Op::EventDestroy:
      return "~Event";
    case fb::Op::StreamQuery:
      return "Stream::query";
    case fb::Op::StatsQuery:
      return "stats";
    case fb::Op::ClockQuery:
      return "clock";
    case fb::Op::TraceDump:
      return "trace";
#if THD_ENABLE_TEST_HOOKS
    case fb::Op::TestLatch:
      return c.op_as_TestLatch()->open() ? "test_latch_open" : "test_latch_wait";
#endif
    case fb::Op::ToDevice:
      return "to";
    case fb::Op::DefineGraph:
      return "define_graph";
    case fb::Op::ReplayGraph:
      return "Graph::replay";
    case fb::Op::DropGraph:
      return "Graph::reset";
  }
  return "unknown";
}

}  // namespace thd::protocol
