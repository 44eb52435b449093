// Meta tensors: metadata without data. Views, shape ops and dtype rules work on
// them exactly as on tensors with data; every op that reads or writes elements
// throws NotImplementedError naming the op, before it touches memory.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include <thd/tensor.h>

namespace thd {
namespace {

// `f` throws NotImplementedError raised by `op`, saying the tensor is on the meta device.
void expect_no_data(const std::function<void()>& f, const std::string& op) {
  try {
    f();
    ADD_FAILURE() << op << " on a meta tensor did not throw";
  } catch (const NotImplementedError& e) {
    EXPECT_EQ(e.context().op, op) << e.what();
    EXPECT_NE(std::string(e.what()).find("meta device"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no data"), std::string::npos) << e.what();
  }
}

// The metadata of `meta` equals that of `real`.
void expect_same_metadata(const Tensor& meta, const Tensor& real) {
  EXPECT_TRUE(meta.is_meta());
  EXPECT_EQ(meta.shape(), real.shape());
  EXPECT_EQ(meta.strides(), real.strides());
  EXPECT_EQ(meta.storage_offset(), real.storage_offset());
  EXPECT_EQ(meta.dtype(), real.dtype());
  EXPECT_EQ(meta.is_contiguous(), real.is_contiguous());
}

TEST(Meta, CreationHasMetadataAndNoData) {
  const Tensor m = Tensor::meta({2, 3, 4}, kFloat64);
  EXPECT_TRUE(m.defined());
  EXPECT_TRUE(m.is_meta());
  EXPECT_EQ(m.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(m.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(m.numel(), 24);
  EXPECT_EQ(m.nbytes(), 24u * 8u);
  EXPECT_EQ(m.storage()->nbytes(), 24u * 8u);
  EXPECT_EQ(m.storage()->data(), nullptr);
  EXPECT_TRUE(m.device().is_cpu());
  EXPECT_FALSE(Tensor::zeros({2}).is_meta());
  EXPECT_FALSE(Tensor().is_meta());
  EXPECT_NE(m.str().find("device=meta"), std::string::npos) << m.str();
  EXPECT_THROW((void)Tensor::meta({2, -1}), ValueError);
  EXPECT_THROW((void)Tensor::meta({int64_t{1} << 40, int64_t{1} << 40}), ValueError);
}

TEST(Meta, ADeviceThisProcessLacksIsOnlyDescribed) {
  const Device gpu = Device::cuda(7);
  const Tensor m = Tensor::meta({4, 2}, kFloat16, gpu);
  EXPECT_EQ(m.device(), gpu);
  EXPECT_EQ(m.t().device(), gpu);
  EXPECT_EQ(m.clone().device(), gpu);
  EXPECT_TRUE(m.clone().is_meta());
  expect_no_data([&] { (void)m.add(m); }, "add");
  expect_no_data([&] { (void)m.item(); }, "item");
}

TEST(Meta, ViewsAndShapeOpsMatchARealTensor) {
  const Tensor real = Tensor::zeros({4, 3, 2});
  const Tensor m = Tensor::meta({4, 3, 2});
  expect_same_metadata(m.view({12, 2}), real.view({12, 2}));
  expect_same_metadata(m.view({-1}), real.view({-1}));
  expect_same_metadata(m.reshape({2, 12}), real.reshape({2, 12}));
  expect_same_metadata(m.flatten(1), real.flatten(1));
  expect_same_metadata(m.transpose(0, 2), real.transpose(0, 2));
  expect_same_metadata(Tensor::meta({3, 2}).t(), Tensor::zeros({3, 2}).t());
  expect_same_metadata(m.permute({2, 0, 1}), real.permute({2, 0, 1}));
  expect_same_metadata(m.slice(0, 1, 4, 2), real.slice(0, 1, 4, 2));
  expect_same_metadata(m.narrow(1, 1, 2), real.narrow(1, 1, 2));
  expect_same_metadata(m.select(1, 2), real.select(1, 2));
  expect_same_metadata(m.unsqueeze(1), real.unsqueeze(1));
  expect_same_metadata(m.unsqueeze(0).squeeze(), real.unsqueeze(0).squeeze());
  expect_same_metadata(m.narrow(0, 0, 1).squeeze(0), real.narrow(0, 0, 1).squeeze(0));
  expect_same_metadata(Tensor::meta({3, 1}).expand({3, 5}), Tensor::zeros({3, 1}).expand({3, 5}));
  EXPECT_TRUE(m.view({24}).shares_storage(m));

  const auto pieces = m.split(std::vector<int64_t>{1, 3}, 0);
  const auto real_pieces = real.split(std::vector<int64_t>{1, 3}, 0);
  ASSERT_EQ(pieces.size(), 2u);
  for (size_t i = 0; i < pieces.size(); ++i) expect_same_metadata(pieces[i], real_pieces[i]);
  const auto chunks = m.chunk(3, 1);
  ASSERT_EQ(chunks.size(), 3u);
  for (size_t i = 0; i < chunks.size(); ++i) expect_same_metadata(chunks[i], real.chunk(3, 1)[i]);

  // The errors of a view are the view's own.
  EXPECT_THROW((void)m.view({5, 5}), ShapeError);
  EXPECT_THROW((void)m.transpose(0, 3), IndexError);
  EXPECT_THROW((void)m.transpose(0, 1).view({24}), ShapeError);
}

TEST(Meta, CopiesOfMetaAreMeta) {
  const Tensor m = Tensor::meta({3, 4}, kInt32).t();
  ASSERT_FALSE(m.is_contiguous());
  // reshape of a layout no view fits: a contiguous meta tensor, as the copy would be.
  const Tensor r = m.reshape({12});
  EXPECT_TRUE(r.is_meta());
  EXPECT_FALSE(r.shares_storage(m));
  expect_same_metadata(r, Tensor::zeros({3, 4}, kInt32).t().reshape({12}));
  const Tensor c = m.contiguous();
  EXPECT_TRUE(c.is_meta());
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.shape(), (Shape{4, 3}));
  EXPECT_TRUE(m.clone().is_meta());
  const Tensor f = m.to(kFloat64);
  EXPECT_TRUE(f.is_meta());
  EXPECT_EQ(f.dtype(), kFloat64);
  EXPECT_EQ(f.shape(), (Shape{4, 3}));
  EXPECT_TRUE(m.to(kInt32).shares_storage(m));  // no conversion: itself
}

TEST(Meta, DtypeRulesWork) {
  const Tensor i = Tensor::meta({2}, kInt32);
  const Tensor h = Tensor::meta({}, kFloat16);
  const Tensor d = Tensor::meta({3, 2}, kFloat64);
  for (const auto& [a, b] : {std::pair{i, h}, std::pair{h, d}, std::pair{i, d}, std::pair{d, i}}) {
    const Tensor ra = Tensor::zeros(a.shape(), a.dtype());
    const Tensor rb = Tensor::zeros(b.shape(), b.dtype());
    EXPECT_EQ(result_type(a, b), result_type(ra, rb));
  }
  EXPECT_EQ(result_type(i, Scalar(1.5)), result_type(Tensor::zeros({2}, kInt32), Scalar(1.5)));
}

TEST(Meta, DataAccessThrowsNamingTheOp) {
  const Tensor m = Tensor::meta({2, 3});
  Tensor w = Tensor::meta({2, 3});
  const Tensor real = Tensor::ones({2, 3});
  Tensor real_out = Tensor::zeros({2, 3});
  expect_no_data([&] { (void)m.data_ptr(); }, "data_ptr");
  expect_no_data([&] { (void)m.data<float>(); }, "data_ptr");
  expect_no_data([&] { (void)m.select(0, 0).select(0, 0).item(); }, "item");
  expect_no_data([&] { (void)m.to_vector<float>(); }, "to_vector");
  expect_no_data([&] { w.copy_(real); }, "copy_");
  expect_no_data([&] { real_out.copy_(m); }, "copy_");
  expect_no_data([&] { w.fill_(1); }, "fill_");
  expect_no_data([&] { (void)m.add(real); }, "add");
  expect_no_data([&] { (void)real.add(m); }, "add");
  expect_no_data([&] { (void)m.mul(2); }, "mul");
  expect_no_data([&] { w.add_(real); }, "add_");
  expect_no_data([&] { (void)m.neg(); }, "neg");
  expect_no_data([&] { w.exp_(); }, "exp_");
  expect_no_data([&] { (void)m.eq(real); }, "eq");
  expect_no_data([&] { (void)m.clamp(0, 1); }, "clamp");
  expect_no_data([&] { (void)m.sum(); }, "sum");
  expect_no_data([&] { (void)m.max(Dims{1}); }, "max");
  expect_no_data([&] { (void)m.softmax(1); }, "softmax");
  expect_no_data([&] { (void)m.matmul(real.t()); }, "matmul");
  expect_no_data([&] { (void)m.sort(1); }, "sort");
  expect_no_data([&] { (void)m.index_select(0, Tensor::zeros({1}, kInt64)); }, "index_select");
  expect_no_data([&] { (void)cat({real, m}, 0); }, "cat");
  expect_no_data([&] { (void)where(real.gt(0), m, real); }, "where");
  // A view of a meta tensor is meta too.
  expect_no_data([&] { (void)m.t().contiguous().abs(); }, "abs");
  // Meta storage on a CUDA device: refused before any device is asked for.
  const Tensor g = Tensor::meta({2, 3}, kFloat32, Device::cuda(0));
  expect_no_data([&] { (void)g.add(g); }, "add");
  expect_no_data([&] { (void)g.sum(); }, "sum");
}

}  // namespace
}  // namespace thd
