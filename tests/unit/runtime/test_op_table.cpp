// The op table master and worker share (protocol/op_table.h): every elementwise op
// of the schema has its name and its call, and the result the master infers on its
// mirrors is the result the worker's call gives on real operands.
#include <gtest/gtest.h>

#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include <thd/tensor.h>

#include "master/infer.h"
#include "protocol/op_table.h"

namespace thd {
namespace {

namespace fb = protocol::fb;

// "IndexSelect" -> "index_select", written out here rather than taken from the code
// under test.
std::string snake_case(const std::string& camel) {
  std::string out;
  for (char c : camel) {
    if (std::isupper(static_cast<unsigned char>(c)) && !out.empty()) out += '_';
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// The op that `f`'s thd::Error names; nullopt when it does not throw.
template <typename F>
std::optional<std::string> op_of_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.context().op;
  }
  return std::nullopt;
}

template <typename F>
bool throws_protocol_error(F&& f) {
  try {
    f();
  } catch (const protocol::ProtocolError&) {
    return true;
  } catch (const Error&) {
  }
  return false;
}

// The ops with an in-place and (but pow) a scalar-first form.
bool arithmetic(fb::BinaryOp op) {
  return op == fb::BinaryOp::Add || op == fb::BinaryOp::Sub || op == fb::BinaryOp::Mul || op == fb::BinaryOp::Div ||
         op == fb::BinaryOp::Pow;
}

TEST(OpTable, EveryUnaryOpOfTheSchemaHasItsNameAndItsCall) {
  int seen = 0;
  for (const fb::UnaryOp op : fb::EnumValuesUnaryOp()) {
    ++seen;
    const std::string name = protocol::op_name(op);
    EXPECT_EQ(name, snake_case(fb::EnumNameUnaryOp(op)));
    // The call is the tensor library's op of that name: its check of the operand
    // names it.
    EXPECT_EQ(op_of_error([&] { (void)protocol::call(op, Tensor()); }), name);
    const Tensor r = protocol::call(op, Tensor::ones({2, 3}, kFloat32));
    EXPECT_EQ(r.shape(), (Shape{2, 3})) << name;
    const bool inplace = op != fb::UnaryOp::Contiguous && op != fb::UnaryOp::Clone;
    Tensor a = Tensor::ones({2}, kFloat32);
    if (inplace) {
      EXPECT_NO_THROW(protocol::call_(op, a)) << name;
      Tensor undefined;
      EXPECT_EQ(op_of_error([&] { protocol::call_(op, undefined); }), name + "_");
    } else {
      EXPECT_TRUE(throws_protocol_error([&] { protocol::call_(op, a); })) << name;
    }
  }
  EXPECT_EQ(seen, static_cast<int>(fb::UnaryOp::MAX) + 1);
  const auto beyond = static_cast<fb::UnaryOp>(static_cast<int>(fb::UnaryOp::MAX) + 1);
  EXPECT_TRUE(throws_protocol_error([&] { (void)protocol::op_name(beyond); }));
  EXPECT_TRUE(throws_protocol_error([&] { (void)protocol::call(beyond, Tensor::ones({1})); }));
}

TEST(OpTable, EveryBinaryOpOfTheSchemaHasItsNameAndItsCall) {
  int seen = 0;
  const Tensor x = Tensor::ones({2, 3}, kFloat32);
  for (const fb::BinaryOp op : fb::EnumValuesBinaryOp()) {
    ++seen;
    const std::string name = protocol::op_name(op);
    EXPECT_EQ(name, snake_case(fb::EnumNameBinaryOp(op)));
    EXPECT_EQ(op_of_error([&] { (void)protocol::call(op, x, Tensor()); }), name);
    EXPECT_EQ(protocol::call(op, x, Tensor::ones({3}, kFloat32)).shape(), (Shape{2, 3})) << name;

    const bool tensor_only = op == fb::BinaryOp::Maximum || op == fb::BinaryOp::Minimum;
    if (tensor_only) {
      EXPECT_TRUE(throws_protocol_error([&] { (void)protocol::call(op, x, Scalar(2)); })) << name;
    } else {
      EXPECT_EQ(op_of_error([&] { (void)protocol::call(op, Tensor(), Scalar(2)); }), name);
      EXPECT_EQ(protocol::call(op, x, Scalar(2)).shape(), (Shape{2, 3})) << name;
    }

    Tensor a = Tensor::ones({3}, kFloat32);
    if (arithmetic(op)) {
      EXPECT_NO_THROW(protocol::call_(op, a, Tensor::ones({3}, kFloat32))) << name;
      EXPECT_NO_THROW(protocol::call_(op, a, Scalar(2))) << name;
      Tensor undefined;
      EXPECT_EQ(op_of_error([&] { protocol::call_(op, undefined, Scalar(2)); }), name + "_");
    } else {
      EXPECT_TRUE(throws_protocol_error([&] { protocol::call_(op, a, Tensor::ones({3}, kFloat32)); })) << name;
      EXPECT_TRUE(throws_protocol_error([&] { protocol::call_(op, a, Scalar(2)); })) << name;
    }

    const bool reversible = arithmetic(op) && op != fb::BinaryOp::Pow;
    if (reversible) {
      EXPECT_EQ(protocol::call_reversed(op, Scalar(2), x).shape(), (Shape{2, 3})) << name;
    } else {
      EXPECT_TRUE(throws_protocol_error([&] { (void)protocol::call_reversed(op, Scalar(2), x); })) << name;
    }
  }
  EXPECT_EQ(seen, static_cast<int>(fb::BinaryOp::MAX) + 1);
  const auto beyond = static_cast<fb::BinaryOp>(static_cast<int>(fb::BinaryOp::MAX) + 1);
  EXPECT_TRUE(throws_protocol_error([&] { (void)protocol::op_name(beyond); }));
  EXPECT_TRUE(throws_protocol_error([&] { (void)protocol::call(beyond, x, x); }));
}

const std::vector<DType> kDtypes = {kBool,     kUInt8,   kInt8,    kInt32,  kInt64,
                                    kFloat16,  kBFloat16, kFloat32, kFloat64};

// What one side made of a call: its result's shape and dtype, or that it threw.
struct Outcome {
  bool threw = false;
  std::string error;
  Shape shape;
  DType dtype = kFloat32;
};

template <typename F>
Outcome outcome_of(F&& f) {
  Outcome o;
  try {
    const Tensor t = f();
    o.shape = t.shape();
    o.dtype = t.dtype();
  } catch (const Error& e) {
    o.threw = true;
    o.error = e.what();
  }
  return o;
}

// The master's inference (on meta mirrors) agrees with the worker's call (on real
// tensors) in whether the op is accepted and in the result's shape and dtype.
void expect_agree(const Outcome& master, const Outcome& worker, const std::string& what) {
  ASSERT_EQ(master.threw, worker.threw) << what << ": master says '" << master.error << "', worker says '"
                                        << worker.error << "'";
  if (master.threw) return;
  EXPECT_EQ(master.shape, worker.shape) << what;
  EXPECT_EQ(master.dtype, worker.dtype) << what << ": master " << dtype_name(master.dtype) << ", worker "
                                        << dtype_name(worker.dtype);
}

std::string describe(const char* op, const Shape& a, DType da, const Shape& b, DType db) {
  return std::string(op) + "(" + shape_str(a) + " " + std::string(dtype_name(da)) + ", " + shape_str(b) + " " +
         std::string(dtype_name(db)) + ")";
}

TEST(OpTable, MasterInfersWhatTheWorkerComputesForUnaryOps) {
  const std::vector<Shape> shapes = {{}, {3}, {2, 0}, {2, 3}};
  for (const fb::UnaryOp op : fb::EnumValuesUnaryOp()) {
    for (const DType dtype : kDtypes) {
      for (const Shape& shape : shapes) {
        const std::string what = describe(protocol::op_name(op), shape, dtype, {}, dtype);
        const Tensor mirror = master::mirror(shape, dtype);
        ASSERT_TRUE(mirror.is_meta());
        expect_agree(outcome_of([&] { return master::infer(op, mirror); }),
                     outcome_of([&] { return protocol::call(op, Tensor::ones(shape, dtype)); }), what);
        if (op == fb::UnaryOp::Contiguous || op == fb::UnaryOp::Clone) continue;
        expect_agree(outcome_of([&] {
                       master::check_inplace(op, mirror);
                       return mirror;
                     }),
                     outcome_of([&] {
                       Tensor self = Tensor::ones(shape, dtype);
                       protocol::call_(op, self);
                       return self;
                     }),
                     what + " in place");
      }
    }
  }
}

TEST(OpTable, MasterInfersWhatTheWorkerComputesForBinaryOps) {
  // Equal, broadcast, 0-dim on either side (promotion looks at it), and shapes that
  // do not broadcast.
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1}, {3}}, {{}, {2}}, {{2}, {}}, {{2}, {3}}};
  const std::vector<Scalar> scalars = {Scalar(2), Scalar(2.5), Scalar(true)};
  for (const fb::BinaryOp op : fb::EnumValuesBinaryOp()) {
    const char* name = protocol::op_name(op);
    const bool tensor_only = op == fb::BinaryOp::Maximum || op == fb::BinaryOp::Minimum;
    for (const DType da : kDtypes) {
      for (const DType db : kDtypes) {
        for (const auto& [sa, sb] : shapes) {
          const std::string what = describe(name, sa, da, sb, db);
          const Tensor ma = master::mirror(sa, da);
          const Tensor mb = master::mirror(sb, db);
          expect_agree(outcome_of([&] { return master::infer(op, ma, mb); }),
                       outcome_of([&] { return protocol::call(op, Tensor::ones(sa, da), Tensor::ones(sb, db)); }),
                       what);
          if (!arithmetic(op)) continue;
          expect_agree(outcome_of([&] {
                         master::check_inplace(op, ma, mb);
                         return ma;
                       }),
                       outcome_of([&] {
                         Tensor self = Tensor::ones(sa, da);
                         protocol::call_(op, self, Tensor::ones(sb, db));
                         return self;
                       }),
                       what + " in place");
        }
      }
      if (tensor_only) continue;
      for (const Scalar& s : scalars) {
        for (const Shape& shape : {Shape{}, Shape{2, 3}}) {
          for (const bool reverse : {false, true}) {
            if (reverse && (!arithmetic(op) || op == fb::BinaryOp::Pow)) continue;
            const std::string what = describe(name, shape, da, {}, s.natural_dtype()) + (reverse ? " reversed" : "");
            expect_agree(outcome_of([&] { return master::infer(op, master::mirror(shape, da), s, reverse); }),
                         outcome_of([&] {
                           const Tensor a = Tensor::ones(shape, da);
                           return reverse ? protocol::call_reversed(op, s, a) : protocol::call(op, a, s);
                         }),
                         what);
          }
          if (!arithmetic(op)) continue;
          const std::string what = describe(name, shape, da, {}, s.natural_dtype()) + " in place";
          expect_agree(outcome_of([&] {
                         const Tensor m = master::mirror(shape, da);
                         master::check_inplace(op, m, s);
                         return m;
                       }),
                       outcome_of([&] {
                         Tensor self = Tensor::ones(shape, da);
                         protocol::call_(op, self, s);
                         return self;
                       }),
                       what);
        }
      }
    }
  }
}

}  // namespace
}  // namespace thd
