// The tensor library's ops written into an existing tensor (tensor/into*.h): the
// very bytes the allocating op makes, for several dtypes, broadcasting and strided
// operands; false, with `out` untouched, when `out` cannot be the result (another
// shape or dtype, not contiguous, storage shared with an operand).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

#include <thd/cuda.h>
#include <thd/error.h>
#include <thd/generator.h>
#include <thd/tensor.h>

#include "tensor/into.h"
#include "tensor/into_elementwise.h"
#include "tensor/into_linalg.h"
#include "tensor/into_random.h"
#include "tensor/into_reduce.h"
#include "tensor/into_softmax.h"
#include "expect_throw.h"
#include "into_testing.h"

namespace thd {
namespace {

using detail::IntoBinary;
using detail::IntoCompare;
using detail::IntoReduce;
using into_testing::refuses;
using into_testing::same_bytes;
using into_testing::sample;
using into_testing::writes;

const IntoBinary kArith[] = {IntoBinary::Add, IntoBinary::Sub, IntoBinary::Mul, IntoBinary::Div,
                             IntoBinary::Maximum, IntoBinary::Minimum};

Tensor eager(IntoBinary op, const Tensor& a, const Tensor& b) {
  switch (op) {
    case IntoBinary::Add: return a.add(b);
    case IntoBinary::Sub: return a.sub(b);
    case IntoBinary::Mul: return a.mul(b);
    case IntoBinary::Div: return a.div(b);
    case IntoBinary::Maximum: return a.maximum(b);
    case IntoBinary::Minimum: return a.minimum(b);
  }
  return {};
}

TEST(Into, BroadcastingArithmeticWritesWhatTheOpMakes) {
  for (DType dt : {kFloat32, kFloat64, kInt32, kInt64}) {
    const Tensor a = sample({3, 1, 5}, dt), b = sample({4, 5}, dt, 1.0);
    const Tensor strided = sample({5, 4}, dt, 2.0).t();  // [4, 5], not contiguous
    const Tensor mixed = sample({4, 5}, dt == kFloat32 ? kInt64 : kFloat32, 3.0);
    for (IntoBinary op : kArith) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " op " + std::to_string(static_cast<int>(op)));
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::broadcast_into(op, o, a, b); }, eager(op, a, b)));
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::broadcast_into(op, o, a, strided); },
                         eager(op, a, strided)));
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::broadcast_into(op, o, mixed, b); },
                         eager(op, mixed, b)));
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::broadcast_into(op, o, b, b.select(0, 1)); },
                         eager(op, b, b.select(0, 1))));
    }
    for (IntoBinary op : {IntoBinary::Add, IntoBinary::Sub, IntoBinary::Mul, IntoBinary::Div}) {
      const Scalar s = 2.5;
      const Tensor expected = op == IntoBinary::Add ? a.add(s) : op == IntoBinary::Sub ? a.sub(s)
                              : op == IntoBinary::Mul ? a.mul(s) : a.div(s);
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::broadcast_into(op, o, a, s); }, expected));
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::broadcast_into(op, o, strided, Scalar(int64_t{3})); },
                         op == IntoBinary::Add ? strided.add(3) : op == IntoBinary::Sub ? strided.sub(3)
                         : op == IntoBinary::Mul ? strided.mul(3) : strided.div(3)));
    }
  }
}

TEST(Into, AFlatBinaryPlanRunAgainWritesWhatTheOpMakesOfTheOperandsCurrentValues) {
  for (IntoBinary op : kArith) {
    for (DType dtype : {kFloat32, kInt64, kFloat64}) {
      const Tensor a = Tensor::arange(1, 13, 1, dtype).reshape({3, 4});
      const Tensor b = Tensor::full({3, 4}, 3, dtype);
      const Tensor out = Tensor::empty({3, 4}, eager(op, a, b).dtype());
      const auto plan = detail::plan_binary_into(op, out, a, b);
      if (op == IntoBinary::Div && dtype != kFloat32 && dtype != kFloat64) {
        EXPECT_FALSE(plan.has_value()) << "an integer div computes in float32: not the flat path";
        continue;
      }
      ASSERT_TRUE(plan.has_value()) << static_cast<int>(op) << " " << dtype_name(dtype);
      plan->run();
      EXPECT_TRUE(same_bytes(out, eager(op, a, b)));
      const_cast<Tensor&>(a).mul_(2);  // the same storages: the plan reads the new values
      plan->run();
      EXPECT_TRUE(same_bytes(out, eager(op, a, b)));
    }
  }
  for (DType dtype : {kFloat32, kInt32}) {
    const Tensor x = Tensor::arange(0, 6, 1, dtype);
    const Tensor out = Tensor::empty({6}, dtype);
    auto plan = detail::plan_binary_into(IntoBinary::Mul, out, x, Scalar(3));
    ASSERT_TRUE(plan.has_value());
    const detail::FlatBinary copy = *plan;  // holds its number itself
    plan.reset();
    copy.run();
    EXPECT_TRUE(same_bytes(out, x.mul(Scalar(3))));
  }
  const Tensor a = Tensor::ones({8});
  EXPECT_FALSE(detail::plan_binary_into(IntoBinary::Add, a, a, Tensor::ones({8})).has_value())
      << "out is an operand";
  EXPECT_FALSE(detail::plan_binary_into(IntoBinary::Add, Tensor::empty({8}), a, Tensor::ones({2, 4})).has_value())
      << "another shape is the general path's";
}

TEST(Into, UnaryOpsOfStridedInputsAndOfOtherDtypesWriteWhatTheOpMakes) {
  using detail::IntoUnary;
  for (DType dt : {kFloat32, kFloat64, kInt32, kInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample({4, 6}, dt);
    for (const Tensor& x : {a, a.t(), a.select(1, 2)}) {
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::unary_into(IntoUnary::Neg, o, x); }, x.neg()));
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::unary_into(IntoUnary::Abs, o, x); }, x.abs()));
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::unary_into(IntoUnary::Relu, o, x); }, x.relu()));
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::unary_into(IntoUnary::Exp, o, x); }, x.exp()));
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::unary_into(IntoUnary::Tanh, o, x); }, x.tanh()));
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::unary_into(IntoUnary::Gelu, o, x); }, x.gelu()));
    }
  }
}

TEST(Into, PowOfFloatsWritesWhatTheOpMakes) {
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor a = sample({2, 3, 4}, dt).abs(), e = sample({3, 1}, dt, 0.5);
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::pow_into(o, a, e); }, a.pow(e)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::pow_into(o, a, Scalar(2)); }, a.pow(2)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::pow_into(o, a.transpose(0, 2), Scalar(0.5)); },
                       a.transpose(0, 2).pow(0.5)));
  }
}

TEST(Into, PowOfIntegersWritesWhatTheOpMakesAndRefusesNegativeExponentsBeforeWriting) {
  for (DType dt : {kUInt8, kInt8, kInt32, kInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample({2, 3, 4}, dt), e = sample({3, 1}, dt, 0.5).abs();
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::pow_into(o, a, e); }, a.pow(e)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::pow_into(o, a, Scalar(3)); }, a.pow(3)));
    const Tensor strided = sample({2, 3}, dt, 0.3).abs().t();
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::pow_into(o, a.transpose(0, 2), strided); },
                       a.transpose(0, 2).pow(strided)));
  }
  const Tensor i = sample({4}, kInt64), negative = Tensor::from_vector<int64_t>({1, -2, 3, 0});
  Tensor out = Tensor::full({4}, 7, kInt64);
  THD_EXPECT_THROW_MSG(detail::pow_into(out, i, negative), ValueError, "negative integer powers");
  THD_EXPECT_THROW_MSG(detail::pow_into(out, i, Scalar(-1)), ValueError, "negative integer powers");
  EXPECT_TRUE(same_bytes(out, Tensor::full({4}, 7, kInt64))) << "written before the exponent was checked";
  // An exponent of another dtype is checked after the conversion the op makes.
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::pow_into(o, i, i.abs().to(kInt32)); },
                      Tensor::zeros({4}, kInt64)));
}

TEST(Into, ComparisonsWriteBools) {
  const IntoCompare ops[] = {IntoCompare::Eq, IntoCompare::Ne, IntoCompare::Lt,
                             IntoCompare::Le, IntoCompare::Gt, IntoCompare::Ge};
  for (DType dt : {kFloat32, kInt64, kInt32}) {
    const Tensor a = sample({3, 1, 4}, dt), b = sample({2, 1}, dt, 0.2);
    for (IntoCompare op : ops) {
      auto eager_of = [&](const Tensor& x, const Tensor& y) {
        switch (op) {
          case IntoCompare::Eq: return x.eq(y);
          case IntoCompare::Ne: return x.ne(y);
          case IntoCompare::Lt: return x.lt(y);
          case IntoCompare::Le: return x.le(y);
          case IntoCompare::Gt: return x.gt(y);
          case IntoCompare::Ge: return x.ge(y);
        }
        return Tensor();
      };
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::compare_into(op, o, a, b); }, eager_of(a, b)));
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::compare_into(op, o, a, Scalar(1)); },
                         eager_of(a, Tensor::full({}, 1, dt))));
    }
  }
}

TEST(Into, Clamp) {
  for (DType dt : {kFloat32, kInt64, kInt32}) {
    const Tensor a = sample({3, 4}, dt);
    for (const Tensor& x : {a, a.t()}) {
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::clamp_into(o, x, Scalar(-1), Scalar(2)); },
                         x.clamp(Scalar(-1), Scalar(2))));
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::clamp_into(o, x, std::nullopt, Scalar(1)); },
                         x.clamp(std::nullopt, Scalar(1))));
    }
    // A float bound on integers computes in float32: a result of another dtype.
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::clamp_into(o, a, Scalar(0.5), std::nullopt); },
                       a.clamp(Scalar(0.5), std::nullopt)));
  }
}

TEST(Into, WhereAndMaskedFill) {
  const Tensor cond = sample({3, 4}, kFloat32).gt(0);
  for (DType dt : {kFloat32, kInt64}) {
    const Tensor a = sample({3, 4}, dt), b = sample({4}, dt, 1.0);
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::where_into(o, cond, a, b); }, where(cond, a, b)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::masked_fill_into(o, b, cond, Scalar(-2)); },
                       b.masked_fill(cond, -2)));
  }
}

TEST(Into, MatrixProductsWriteWhatTheOpMakes) {
  for (DType dt : {kFloat32, kFloat64, kInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample({5, 7}, dt), b = sample({7, 3}, dt, 1.0), v = sample({7}, dt, 2.0);
    const Tensor batch = sample({2, 5, 7}, dt, 3.0), batch2 = sample({2, 7, 3}, dt, 4.0);
    const Tensor bt = sample({3, 7}, dt, 5.0).t();  // column-major [7, 3]
    using detail::IntoMatmul;
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::matmul_into(IntoMatmul::Mm, o, a, b); }, a.mm(b)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::matmul_into(IntoMatmul::Mm, o, a, bt); }, a.mm(bt)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::matmul_into(IntoMatmul::Matmul, o, a, v); }, a.matmul(v)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::matmul_into(IntoMatmul::Matmul, o, batch, b); },
                       batch.matmul(b)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::matmul_into(IntoMatmul::Matmul, o, batch, batch2); },
                       batch.matmul(batch2)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::matmul_into(IntoMatmul::Bmm, o, batch, batch2); },
                       batch.bmm(batch2)));
    const Tensor self = sample({5, 3}, dt, 6.0), row = sample({3}, dt, 7.0);
    const Scalar beta = is_floating_point(dt) ? Scalar(0.5) : Scalar(2), alpha = is_floating_point(dt) ? Scalar(1.5) : Scalar(3);
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::addmm_into(o, self, a, b, beta, alpha); },
                       self.addmm(a, b, beta, alpha)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::addmm_into(o, row, a, bt, beta, alpha); },
                       row.addmm(a, bt, beta, alpha)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::addmm_into(o, self, a, b, Scalar(0), alpha); },
                       self.addmm(a, b, 0, alpha)));
    // Dot and outer products, of contiguous vectors and of strided ones.
    const Tensor v2 = sample({7}, dt, 8.0), w = sample({3}, dt, 9.0), every_other = sample({14}, dt, 10.0).slice(0, 0, 14, 2);
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::matmul_into(IntoMatmul::Dot, o, v, v2); }, v.dot(v2)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::matmul_into(IntoMatmul::Dot, o, v, every_other); },
                       v.dot(every_other)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::matmul_into(IntoMatmul::Matmul, o, v, v2); }, v.matmul(v2)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::matmul_into(IntoMatmul::Outer, o, v, w); }, v.outer(w)));
    EXPECT_TRUE(writes([&](const Tensor& o) { return detail::matmul_into(IntoMatmul::Outer, o, every_other, w); },
                       every_other.outer(w)));
  }
  // Outer promotes as mul does; the 16-bit floats' dot accumulates in double.
  const Tensor i32 = sample({5}, kInt32), f32 = sample({4}, kFloat32), bf = sample({6}, kBFloat16);
  EXPECT_TRUE(writes([&](const Tensor& o) { return detail::matmul_into(detail::IntoMatmul::Outer, o, i32, f32); },
                     i32.outer(f32)));
  EXPECT_TRUE(writes([&](const Tensor& o) { return detail::matmul_into(detail::IntoMatmul::Dot, o, bf, bf); }, bf.dot(bf)));
  // Another shape or dtype, storage shared with an operand.
  const Tensor u = sample({4}, kFloat32, 1.0);
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::matmul_into(detail::IntoMatmul::Dot, o, f32, u); },
                      Tensor::zeros({1}, kFloat32)));
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::matmul_into(detail::IntoMatmul::Dot, o, f32, u); },
                      Tensor::zeros({}, kFloat64)));
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::matmul_into(detail::IntoMatmul::Outer, o, f32, u); },
                      Tensor::zeros({4, 4}, kFloat64)));
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::matmul_into(detail::IntoMatmul::Outer, o, f32, u); },
                      Tensor::zeros({16}, kFloat32)));
  Tensor square = Tensor::zeros({4, 4}, kFloat32);
  const Tensor row = square.select(0, 1);
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::matmul_into(detail::IntoMatmul::Outer, o, row, u); }, square));
  // Operands the op refuses: its error, with `out` left as it was.
  Tensor scalar_out = Tensor::full({}, 7, kFloat32);
  THD_EXPECT_THROW_MSG(detail::matmul_into(detail::IntoMatmul::Dot, scalar_out, f32, sample({5}, kFloat32)), ShapeError,
                       "inconsistent tensor size");
  THD_EXPECT_THROW_MSG(detail::matmul_into(detail::IntoMatmul::Dot, scalar_out, f32, u.to(kFloat64)), TypeError,
                       "expected both vectors to have the same dtype");
  THD_EXPECT_THROW_MSG(detail::matmul_into(detail::IntoMatmul::Outer, square, square, u), ShapeError,
                       "expected 1-D tensors");
  EXPECT_EQ(scalar_out.item<float>(), 7.0f);
  EXPECT_TRUE(same_bytes(square, Tensor::zeros({4, 4}, kFloat32)));
  // The 16-bit floats round a float32 product: left to the op.
  const Tensor h = sample({4, 4}, kFloat16);
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::matmul_into(detail::IntoMatmul::Mm, o, h, h); },
                      Tensor::zeros({4, 4}, kFloat16)));
}

TEST(Into, ReductionsWriteWhatTheOpMakes) {
  for (DType dt : {kFloat32, kFloat64, kInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample({4, 5, 6}, dt);
    const Tensor strided = a.transpose(0, 2);
    for (const Tensor& x : {a, strided}) {
      struct Case {
        IntoReduce kind;
        std::function<Tensor()> eager;
        detail::ReduceArgs args;
      };
      std::vector<Case> cases = {
          {IntoReduce::Sum, [&] { return x.sum({1}, false); }, {false, {1}, false}},
          {IntoReduce::Sum, [&] { return x.sum({0, 2}, true); }, {false, {0, 2}, true}},
          {IntoReduce::Sum, [&] { return x.sum(); }, {}},
          {IntoReduce::Prod, [&] { return x.prod({2}, false); }, {false, {2}, false}},
          {IntoReduce::Max, [&] { return x.max({-1}, true); }, {false, {-1}, true}},
          {IntoReduce::Min, [&] { return x.min(); }, {}},
          {IntoReduce::Argmax, [&] { return x.argmax(1, false); }, {false, {1}, false}},
          {IntoReduce::Argmin, [&] { return x.argmin(); }, {}},
          {IntoReduce::Any, [&] { return x.any({0}, false); }, {false, {0}, false}},
          {IntoReduce::All, [&] { return x.all(); }, {}},
      };
      if (is_floating_point(dt)) {
        cases.push_back({IntoReduce::Mean, [&] { return x.mean({1}, false); }, {false, {1}, false}});
        cases.push_back({IntoReduce::Norm, [&] { return x.norm(3.0, {2}, false); }, {false, {2}, false, 3.0}});
        cases.push_back({IntoReduce::Var, [&] { return x.var({0}, 0, true); }, {false, {0}, true, 2.0, 0}});
        cases.push_back({IntoReduce::Std, [&] { return x.std(Dims{}, 1); }, {}});
      }
      for (const Case& c : cases) {
        SCOPED_TRACE(static_cast<int>(c.kind));
        EXPECT_TRUE(writes([&](const Tensor& o) { return detail::reduce_into(c.kind, o, x, c.args); }, c.eager()));
      }
    }
  }
}

TEST(Into, SoftmaxWritesWhatTheOpMakes) {
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor a = sample({3, 4, 5}, dt);
    for (int64_t dim : {0, 1, -1}) {
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::softmax_into(o, a, dim, false); }, a.softmax(dim)));
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::softmax_into(o, a, dim, true); }, a.log_softmax(dim)));
      EXPECT_TRUE(writes([&](const Tensor& o) { return detail::softmax_into(o, a.transpose(0, 2), dim, false); },
                         a.transpose(0, 2).softmax(dim)));
    }
  }
}

TEST(Into, RandomDrawsAreTheOpsAndAdvanceTheGeneratorAlike) {
  for (DType dt : {kFloat32, kFloat64}) {
    Generator eager_gen, into_gen;
    eager_gen.manual_seed(42);
    into_gen.manual_seed(42);
    for (int round = 0; round < 3; ++round) {
      const Tensor r = Tensor::rand({7, 3}, dt, &eager_gen);
      const Tensor n = Tensor::randn({5}, dt, &eager_gen);
      const Tensor i = Tensor::randint(-4, 9, {6}, kInt64, &eager_gen);
      Tensor ro = Tensor::empty({7, 3}, dt), no = Tensor::empty({5}, dt), io = Tensor::empty({6}, kInt64);
      ASSERT_TRUE(detail::rand_into(ro, {7, 3}, dt, &into_gen));
      ASSERT_TRUE(detail::randn_into(no, {5}, dt, &into_gen));
      ASSERT_TRUE(detail::randint_into(io, -4, 9, {6}, kInt64, &into_gen));
      EXPECT_TRUE(same_bytes(ro, r));
      EXPECT_TRUE(same_bytes(no, n));
      EXPECT_TRUE(same_bytes(io, i));
      EXPECT_EQ(into_gen.offset(), eager_gen.offset());
    }
    // Refused: nothing drawn.
    const uint64_t before = into_gen.offset();
    EXPECT_FALSE(detail::rand_into(Tensor::empty({3}, dt), {4}, dt, &into_gen));
    EXPECT_EQ(into_gen.offset(), before);
  }
}

// On a GPU: the elementwise ops, where and the matrix products write the kept
// tensor with the kernels the allocating ops run; reductions, softmax and random
// draws are left to the ops.
TEST(Into, OnAGpuTheElementwiseOpsAndProductsWriteWhatTheOpMakes) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "needs a CUDA device";
  const Device gpu = Device::cuda(0);
  const Tensor a = sample({3, 1, 5}, kFloat32).to(gpu), b = sample({4, 5}, kFloat32, 1.0).to(gpu);
  for (IntoBinary op : kArith) {
    Tensor out = Tensor::zeros({3, 4, 5}, kFloat32, gpu);
    ASSERT_TRUE(detail::broadcast_into(op, out, a, b));
    EXPECT_TRUE(same_bytes(out.to(Device::cpu()), eager(op, a, b).to(Device::cpu())));
  }
  Tensor less = Tensor::zeros({3, 4, 5}, kBool, gpu);
  ASSERT_TRUE(detail::compare_into(IntoCompare::Lt, less, a, b));
  EXPECT_TRUE(same_bytes(less.to(Device::cpu()), a.lt(b).to(Device::cpu())));
  Tensor p = Tensor::zeros({3, 1, 5}, kFloat32, gpu);
  ASSERT_TRUE(detail::pow_into(p, a.abs(), Scalar(1.5)));
  EXPECT_TRUE(same_bytes(p.to(Device::cpu()), a.abs().pow(1.5).to(Device::cpu())));
  const Tensor m1 = sample({6, 5}, kFloat32).to(gpu), m2 = sample({5, 4}, kFloat32, 2.0).to(gpu);
  Tensor mm = Tensor::zeros({6, 4}, kFloat32, gpu);
  ASSERT_TRUE(detail::matmul_into(detail::IntoMatmul::Mm, mm, m1, m2));
  EXPECT_TRUE(same_bytes(mm.to(Device::cpu()), m1.mm(m2).to(Device::cpu())));
  Tensor e = Tensor::zeros({4, 6}, kFloat32, gpu);
  ASSERT_TRUE(detail::unary_into(detail::IntoUnary::Exp, e, m1.t().narrow(0, 0, 4).t().t()));
  EXPECT_TRUE(same_bytes(e.to(Device::cpu()), m1.t().narrow(0, 0, 4).exp().to(Device::cpu())));
  Tensor sum = Tensor::zeros({6}, kFloat32, gpu);
  EXPECT_FALSE(detail::reduce_into(IntoReduce::Sum, sum, m1, {false, {1}}));
}

TEST(Into, AnOutputThatCannotBeTheResultIsRefusedAndLeftAsItWas) {
  const Tensor a = sample({4, 4}, kFloat32), b = sample({4, 4}, kFloat32, 1.0);
  // Storage shared with an operand, even as the operand itself.
  Tensor alias = a.clone();
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::broadcast_into(IntoBinary::Add, o, alias, b); }, alias));
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::binary_into(IntoBinary::Add, o, alias, b); }, alias));
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::unary_into(detail::IntoUnary::Exp, o, alias); }, alias));
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::matmul_into(detail::IntoMatmul::Mm, o, alias, b); },
                      alias));
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::softmax_into(o, alias, 1, false); }, alias));
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::reduce_into(IntoReduce::Sum, o, alias, {false, {1}}); },
                      alias.select(1, 0)));
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::addmm_into(o, alias.select(0, 0), a, b, 1, 1); },
                      alias));
  // Another shape, dtype, or a strided out.
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::broadcast_into(IntoBinary::Add, o, a, b); },
                      Tensor::zeros({16}, kFloat32)));
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::broadcast_into(IntoBinary::Add, o, a, b); },
                      Tensor::zeros({4, 4}, kFloat64)));
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::compare_into(IntoCompare::Lt, o, a, b); },
                      Tensor::zeros({4, 4}, kFloat32)));
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::matmul_into(detail::IntoMatmul::Mm, o, a, b); },
                      Tensor::zeros({4, 4}, kFloat32).t()));
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::reduce_into(IntoReduce::Sum, o, a, {false, {1}, true}); },
                      Tensor::zeros({4}, kFloat32)));
  // Operands that do not broadcast: left to the op, which raises the error.
  EXPECT_TRUE(refuses([&](const Tensor& o) { return detail::broadcast_into(IntoBinary::Add, o, a, sample({3}, kFloat32)); },
                      Tensor::zeros({4, 4}, kFloat32)));
}

}  // namespace
}  // namespace thd
