// index_select and gather written into an existing tensor (tensor/into_indexing.h):
// the allocating op's bytes; `out` untouched and false when it cannot be the result;
// the op's error, with `out` untouched, for an index the op refuses.
#include <gtest/gtest.h>

#include <vector>

#include <thd/error.h>
#include <thd/tensor.h>

#include "expect_throw.h"
#include "into_testing.h"
#include "tensor/into_indexing.h"

namespace thd {
namespace {

using detail::IntoIndex;
using into_testing::refuses;
using into_testing::same_bytes;
using into_testing::sample;
using into_testing::writes;

using detail::index_into;

TEST(IntoIndexing, IndexSelectAndGatherWriteWhatTheOpMakes) {
  for (DType dt : {kFloat32, kFloat64, kInt64, kInt8, kBool, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample({4, 5, 6}, dt);
    const Tensor strided = a.transpose(0, 2);  // [6, 5, 4]
    const Tensor rows = Tensor::from_vector<int64_t>({3, 0, 0, 2, 1}, {5});
    const Tensor rows32 = rows.to(kInt32);
    for (const Tensor& x : {a, strided}) {
      for (int64_t dim : {0, 1, -1}) {
        SCOPED_TRACE(dim);
        EXPECT_TRUE(writes([&](const Tensor& o) { return index_into(IntoIndex::IndexSelect, o, x, dim, rows); },
                           x.index_select(dim, rows)));
        EXPECT_TRUE(writes([&](const Tensor& o) { return index_into(IntoIndex::IndexSelect, o, x, dim, rows32); },
                           x.index_select(dim, rows32)));
      }
      // Every index below 4, the smallest size.
      std::vector<int64_t> values(48);
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(i * 7 % 4);
      const Tensor idx = Tensor::from_vector(values, {3, 4, 4});
      for (int64_t dim : {0, 1, 2}) {
        SCOPED_TRACE(dim);
        EXPECT_TRUE(writes([&](const Tensor& o) { return index_into(IntoIndex::Gather, o, x, dim, idx); },
                           x.gather(dim, idx)));
        EXPECT_TRUE(writes([&](const Tensor& o) { return index_into(IntoIndex::Gather, o, x, dim, idx.transpose(0, 1)); },
                           x.gather(dim, idx.transpose(0, 1))));
      }
    }
  }
  // A scalar index of index_select, 0-dim gathers.
  const Tensor v = sample({7}, kFloat32);
  const Tensor three = Tensor::full({}, 3, kInt64);
  EXPECT_TRUE(writes([&](const Tensor& o) { return index_into(IntoIndex::IndexSelect, o, v, 0, three); },
                     v.index_select(0, three)));
  EXPECT_TRUE(writes([&](const Tensor& o) { return index_into(IntoIndex::Gather, o, v, 0, three); }, v.gather(0, three)));
  const Tensor s = Tensor::full({}, 2.5, kFloat64), zero = Tensor::zeros({}, kInt64);
  EXPECT_TRUE(writes([&](const Tensor& o) { return index_into(IntoIndex::Gather, o, s, 0, zero); }, s.gather(0, zero)));
}

TEST(IntoIndexing, AnOutputThatCannotBeTheResultIsRefusedAndLeftAsItWas) {
  const Tensor a = sample({4, 5}, kFloat32);
  const Tensor rows = Tensor::from_vector<int64_t>({3, 0, 1}, {3});
  const Tensor idx = Tensor::from_vector<int64_t>({0, 1, 2, 3, 3, 2}, {2, 3});
  auto select = [&](const Tensor& x) {
    return [&, x](const Tensor& o) { return index_into(IntoIndex::IndexSelect, o, x, 0, rows); };
  };
  auto gather = [&](const Tensor& x) { return [&, x](const Tensor& o) { return index_into(IntoIndex::Gather, o, x, 0, idx); }; };
  // Another shape, another dtype, strided.
  EXPECT_TRUE(refuses(select(a), Tensor::zeros({4, 5}, kFloat32)));
  EXPECT_TRUE(refuses(select(a), Tensor::zeros({15}, kFloat32)));
  EXPECT_TRUE(refuses(select(a), Tensor::zeros({3, 5}, kFloat64)));
  EXPECT_TRUE(refuses(select(a), Tensor::zeros({5, 3}, kFloat32).t()));
  EXPECT_TRUE(refuses(gather(a), Tensor::zeros({3, 2}, kFloat32)));
  EXPECT_TRUE(refuses(gather(a), Tensor::zeros({2, 3}, kInt64)));
  // Storage shared with the input or the index.
  Tensor alias = Tensor::zeros({3, 5}, kFloat32);
  const Tensor in_range = Tensor::from_vector<int64_t>({2, 0, 1}, {3});
  EXPECT_TRUE(refuses([&](const Tensor& o) { return index_into(IntoIndex::IndexSelect, o, alias, 0, in_range); }, alias));
  Tensor index_alias = Tensor::from_vector<int64_t>({0, 1, 1, 0}, {2, 2});
  EXPECT_TRUE(refuses([&](const Tensor& o) { return index_into(IntoIndex::Gather, o, a.to(kInt64), 1, index_alias); },
                      index_alias));
  // A 0-dim input of index_select: the op's clone.
  EXPECT_TRUE(refuses([&](const Tensor& o) { return index_into(IntoIndex::IndexSelect, o, Tensor::full({}, 1.0, kFloat32), 0,
                                                              Tensor::zeros({1}, kInt64)); },
                      Tensor::zeros({}, kFloat32)));
}

TEST(IntoIndexing, AnIndexTheOpRefusesRaisesItsErrorAndLeavesTheOutputAsItWas) {
  const Tensor a = sample({4, 5}, kFloat32);
  Tensor out = Tensor::full({2, 5}, 7, kFloat32);
  const Tensor before = out.clone();
  THD_EXPECT_THROW_MSG(index_into(IntoIndex::IndexSelect, out, a, 0, Tensor::from_vector<int64_t>({1, 4}, {2})),
                       IndexError, "index 4 is out of bounds for dimension 0 with size 4");
  THD_EXPECT_THROW_MSG(index_into(IntoIndex::IndexSelect, out, a, 0, Tensor::from_vector<int64_t>({1, -1}, {2})),
                       IndexError, "index -1 is out of bounds");
  THD_EXPECT_THROW_MSG(index_into(IntoIndex::IndexSelect, out, a, 0, Tensor::from_vector<float>({1, 2}, {2})),
                       TypeError, "expected dtype int64 or int32 for index");
  THD_EXPECT_THROW_MSG(index_into(IntoIndex::IndexSelect, out, a, 2, Tensor::from_vector<int64_t>({1, 2}, {2})),
                       IndexError, "out of range");
  EXPECT_TRUE(same_bytes(out, before));
  THD_EXPECT_THROW_MSG(index_into(IntoIndex::Gather, out, a, 1, Tensor::from_vector<int64_t>({0, 1, 2, 3, 5, 0, 1, 2, 3, 4}, {2, 5})),
                       IndexError, "index 5 is out of bounds for dimension 1 with size 5");
  THD_EXPECT_THROW_MSG(index_into(IntoIndex::Gather, out, a, 0, Tensor::zeros({2, 6}, kInt64)), ShapeError,
                       "size does not match at dimension 1");
  THD_EXPECT_THROW_MSG(index_into(IntoIndex::Gather, out, a, 0, Tensor::zeros({10}, kInt64)), ShapeError,
                       "index tensor must have the same number of dimensions");
  EXPECT_TRUE(same_bytes(out, before));
}

}  // namespace
}  // namespace thd
