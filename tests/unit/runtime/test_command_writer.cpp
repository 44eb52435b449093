// protocol::CommandWriter: the elementwise commands it writes in one piece read
// back, through the verifier and the generated accessors, exactly as the ones
// FlatBuffers' generated builders make; in batches mixed with those, across buffer
// growth and builder resets; no larger on the wire; and a batch whose written
// tables are damaged is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "expect_throw.h"
#include "protocol/codec.h"
#include "protocol/command_writer.h"

namespace thd {
namespace {

namespace fb = protocol::fb;
using protocol::ElementwiseCommand;

struct Issued {
  uint64_t id;
  uint32_t stream;
  ElementwiseCommand command;
  bool generic;  // a Fetch built by the generated code, between the written ones
};

// A whole Message holding a CommandBatch of `issued`, the elementwise commands
// written by a CommandWriter (or, with `generated`, by FlatBuffers' builders).
std::vector<uint8_t> batch_of(const std::vector<Issued>& issued, bool generated = false,
                              flatbuffers::FlatBufferBuilder* reuse = nullptr,
                              protocol::CommandWriter* writer = nullptr) {
  flatbuffers::FlatBufferBuilder own(64);
  protocol::CommandWriter own_writer;
  flatbuffers::FlatBufferBuilder& b = reuse != nullptr ? *reuse : own;
  protocol::CommandWriter& w = writer != nullptr ? *writer : own_writer;
  std::vector<flatbuffers::Offset<fb::Command>> commands;
  for (const Issued& i : issued) {
    if (i.generic) {
      commands.push_back(fb::CreateCommand(b, i.id, fb::Op::Fetch, fb::CreateFetch(b, i.command.a, 77).Union(), i.stream));
    } else if (generated) {
      commands.push_back(fb::CreateCommand(b, i.id, i.command.type, i.command.build(b), i.stream));
    } else {
      commands.push_back(w.write(b, i.id, i.stream, i.command));
    }
  }
  const auto batch = fb::CreateCommandBatch(b, 1, false, b.CreateVector(commands));
  b.Finish(fb::CreateMessage(b, protocol::kVersion, fb::Body::CommandBatch, batch.Union()));
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

const fb::CommandBatch& verified_batch(const std::vector<uint8_t>& bytes) {
  const fb::Message& m = protocol::verify_message(bytes, "test");
  const fb::CommandBatch* batch = m.body_as_CommandBatch();
  EXPECT_NE(batch, nullptr);
  return *batch;
}

void expect_reads_back(const fb::Command& c, const Issued& i) {
  EXPECT_EQ(c.id(), i.id);
  EXPECT_EQ(c.stream(), i.stream);
  if (i.generic) {
    ASSERT_EQ(c.op_type(), fb::Op::Fetch);
    EXPECT_EQ(c.op_as_Fetch()->src(), i.command.a);
    return;
  }
  ASSERT_EQ(c.op_type(), i.command.type);
  switch (i.command.type) {
    case fb::Op::Unary: {
      const fb::Unary* u = c.op_as_Unary();
      ASSERT_NE(u, nullptr);
      EXPECT_EQ(u->out(), i.command.out);
      EXPECT_EQ(static_cast<uint8_t>(u->op()), i.command.op);
      EXPECT_EQ(u->a(), i.command.a);
      break;
    }
    case fb::Op::Binary: {
      const fb::Binary* t = c.op_as_Binary();
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->out(), i.command.out);
      EXPECT_EQ(static_cast<uint8_t>(t->op()), i.command.op);
      EXPECT_EQ(t->a(), i.command.a);
      EXPECT_EQ(t->b(), i.command.b);
      break;
    }
    case fb::Op::BinaryScalar: {
      const fb::BinaryScalar* t = c.op_as_BinaryScalar();
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->out(), i.command.out);
      EXPECT_EQ(static_cast<uint8_t>(t->op()), i.command.op);
      EXPECT_EQ(t->a(), i.command.a);
      EXPECT_EQ(t->reverse(), i.command.reverse);
      ASSERT_NE(t->b(), nullptr);
      const Scalar got = protocol::from_fb(*t->b());
      const Scalar want = protocol::from_fb(i.command.scalar);
      EXPECT_EQ(got.natural_dtype(), want.natural_dtype());
      EXPECT_EQ(got.to_double(), want.to_double());
      break;
    }
    default: ADD_FAILURE() << "unexpected op type";
  }
}

// Every kind, in-place forms (out 0), ops whose code is the enum's default (Add,
// Neg), large ids, other streams, and generated commands in between.
std::vector<Issued> mixed_commands(size_t n) {
  std::vector<Issued> issued;
  for (size_t k = 0; k < n; ++k) {
    const uint64_t id = 1000 + 3 * k;
    const uint32_t stream = k % 5 == 0 ? static_cast<uint32_t>(k % 7) : 0;
    const uint64_t out = k % 4 == 3 ? 0 : (uint64_t{1} << 40) + k;
    const uint64_t a = 7 + k, b = 0xffffffffffffull - k;
    ElementwiseCommand c;
    switch (k % 5) {
      case 0: c = {.type = fb::Op::Binary, .op = static_cast<uint8_t>(k % 13), .out = out, .a = a, .b = b}; break;
      case 1: c = {.type = fb::Op::Unary, .op = static_cast<uint8_t>(k % 14), .out = out, .a = a}; break;
      case 2:
        c = {.type = fb::Op::BinaryScalar, .op = static_cast<uint8_t>(k % 4), .out = out, .a = a,
             .scalar = protocol::to_fb(k % 3 == 0 ? Scalar(2.5) : k % 3 == 1 ? Scalar(int64_t{-3}) : Scalar(true)),
             .reverse = out != 0 && k % 2 == 0};
        break;
      case 3: c = {.type = fb::Op::Binary, .op = 0, .out = out, .a = a, .b = a}; break;
      default: c = {.a = a}; break;
    }
    issued.push_back({id, stream, c, k % 5 == 4});
  }
  return issued;
}

TEST(CommandWriter, WrittenCommandsReadBackThroughTheVerifier) {
  for (size_t n : {size_t{1}, size_t{2}, size_t{9}, size_t{3000}}) {  // 3000: the buffer grows many times
    const auto issued = mixed_commands(n);
    const auto bytes = batch_of(issued);
    const fb::CommandBatch& batch = verified_batch(bytes);
    ASSERT_EQ(batch.commands()->size(), issued.size());
    for (size_t k = 0; k < issued.size(); ++k) {
      SCOPED_TRACE(k);
      expect_reads_back(*batch.commands()->Get(static_cast<flatbuffers::uoffset_t>(k)), issued[k]);
    }
  }
}

TEST(CommandWriter, ReadsBackAsTheGeneratedBuildersCommands) {
  const auto issued = mixed_commands(40);
  const auto written_bytes = batch_of(issued);
  const fb::CommandBatch& written = verified_batch(written_bytes);
  const auto generated_bytes = batch_of(issued, /*generated=*/true);
  const fb::CommandBatch& generated = verified_batch(generated_bytes);
  ASSERT_EQ(written.commands()->size(), generated.commands()->size());
  for (flatbuffers::uoffset_t k = 0; k < written.commands()->size(); ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(protocol::op_name(*written.commands()->Get(k)), protocol::op_name(*generated.commands()->Get(k)));
    expect_reads_back(*generated.commands()->Get(k), issued[k]);
  }
}

TEST(CommandWriter, ABatchOfOneOpIsNoLargerThanTheGeneratedOne) {
  // mw.batch.bytes.one_op: `c = a + b` alone in a batch.
  const std::vector<Issued> one{{5, 0, {.type = fb::Op::Binary, .op = 0, .out = 9, .a = 3, .b = 4}, false}};
  EXPECT_LE(batch_of(one).size(), batch_of(one, /*generated=*/true).size());
  // Many: each op's tables, the vtables shared.
  const auto many = mixed_commands(500);
  EXPECT_LE(batch_of(many).size(), batch_of(many, /*generated=*/true).size() * 11 / 10);
}

TEST(CommandWriter, BuilderReuseAfterResetWritesTheVtablesAgain) {
  flatbuffers::FlatBufferBuilder b(64);
  protocol::CommandWriter w;
  for (int round = 0; round < 3; ++round) {
    const auto issued = mixed_commands(20 + round);
    const auto bytes = batch_of(issued, false, &b, &w);
    const fb::CommandBatch& batch = verified_batch(bytes);
    for (flatbuffers::uoffset_t k = 0; k < batch.commands()->size(); ++k) {
      expect_reads_back(*batch.commands()->Get(k), issued[k]);
    }
    b.Clear();
    w.reset();
  }
}

TEST(CommandWriter, RefusesAnOpTypeThatIsNotElementwise) {
  flatbuffers::FlatBufferBuilder b(64);
  protocol::CommandWriter w;
  THD_EXPECT_THROW_MSG(w.write(b, 1, 0, {.type = fb::Op::Fetch}), ValueError, "not an elementwise op");
}

// The offset of `needle` (8 bytes) in `bytes`, which holds it once.
size_t find_once(const std::vector<uint8_t>& bytes, uint64_t needle) {
  size_t at = bytes.size();
  for (size_t i = 0; i + 8 <= bytes.size(); ++i) {
    if (std::memcmp(bytes.data() + i, &needle, 8) == 0) {
      EXPECT_EQ(at, bytes.size()) << "the value is in the message twice";
      at = i;
    }
  }
  EXPECT_LT(at, bytes.size());
  return at;
}

TEST(CommandWriter, ADamagedWrittenCommandIsRefused) {
  const uint64_t out = 0x1122334455667788ull;
  const std::vector<Issued> one{{5, 0, {.type = fb::Op::Binary, .op = 2, .out = out, .a = 3, .b = 4}, false}};
  const auto good = batch_of(one);
  (void)verified_batch(good);
  // The Binary table's soffset sits 4 bytes before `out`: pointing its vtable
  // outside the message is refused.
  const size_t table = find_once(good, out) - 4;
  auto bad = good;
  const int32_t far = -static_cast<int32_t>(bad.size()) * 4;
  std::memcpy(bad.data() + table, &far, 4);
  EXPECT_THROW(protocol::verify_message(bad, "test"), protocol::ProtocolError);
  // The Command's offset to its op table (4 bytes after the Command's start, the
  // Command of the default stream 20 bytes before the op table) pointing past the
  // message's end.
  bad = good;
  const uint32_t past = static_cast<uint32_t>(bad.size());
  std::memcpy(bad.data() + table - 20 + 4, &past, 4);
  EXPECT_THROW(protocol::verify_message(bad, "test"), protocol::ProtocolError);
  // Cut short.
  bad.assign(good.begin(), good.end() - 24);
  EXPECT_THROW(protocol::verify_message(bad, "test"), protocol::ProtocolError);
}

}  // namespace
}  // namespace thd
