// Indexing, joining and sorting on a worker against the local library:
// index_select, gather, scatter(_), masked_fill(_), split, chunk, sort, topk, and the
// free functions cat, stack and where.
#include <gtest/gtest.h>

#include <thd/distributed.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class RemoteIndexing : public JobTest<2> {};

TEST_F(RemoteIndexing, IndexSelectGatherScatter) {
  for (DType dt : {kBool, kInt32, kFloat16, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({4, 3}, dt, 1);
    const Tensor rows = make({5}, kInt64, {3, 0, 0, 2, 1});
    const Tensor cols = make({2}, kInt32, {2, 0});
    expect_remote_matches("index_select(0)", [](auto x, auto i) { return x.index_select(0, i); }, a, rows);
    expect_remote_matches("index_select(1, int32)", [](auto x, auto i) { return x.index_select(1, i); }, a,
                          cols);
    const Tensor gidx = make({4, 2}, kInt64, {0, 2, 1, 1, 2, 0, 0, 0});
    expect_remote_matches("gather(1)", [](auto x, auto i) { return x.gather(1, i); }, a, gidx);
    const Tensor perm = make({2, 3}, kInt64, {3, 1, 0, 0, 2, 3});  // distinct rows per column
    const Tensor src = sample_tensor({2, 3}, dt, 2);
    expect_remote_matches("scatter(0, src)", [](auto x, auto i, auto s) { return x.scatter(0, i, s); }, a, perm, src);
    expect_remote_matches("scatter(0, value)", [](auto x, auto i) { return x.scatter(0, i, 1); }, a, perm);
    expect_remote_matches("scatter_(0, src)", [](auto x, auto i, auto s) { return x.scatter_(0, i, s); }, a, perm,
                          src);
    expect_remote_matches("scatter_(1, value)", [](auto x, auto i) { return x.scatter_(1, i, 0); }, a,
                          make({4, 1}, kInt64, {2, 0, 1, 2}));
    const Tensor mask = make({3}, kBool, {1, 0, 1});
    expect_remote_matches("masked_fill (broadcast mask)", [](auto x, auto m) { return x.masked_fill(m, 5); }, a,
                          mask);
    expect_remote_matches("masked_fill_", [](auto x, auto m) { return x.masked_fill_(m, 0); }, a,
                          make({4, 3}, kBool, {1, 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1}));
  }
}

TEST_F(RemoteIndexing, SplitAndChunk) {
  const Tensor a = sample_tensor({5, 6}, kFloat32, 3);
  expect_remote_matches("split(2)", [](auto x) { return x.split(2); }, a);
  expect_remote_matches("split(4, 1)", [](auto x) { return x.split(4, 1); }, a);
  expect_remote_matches("split(sizes)", [](auto x) { return x.split(std::vector<int64_t>{1, 3, 1}); }, a);
  expect_remote_matches("split(sizes, -1)", [](auto x) { return x.split(std::vector<int64_t>{6, 0}, -1); }, a);
  expect_remote_matches("chunk(2)", [](auto x) { return x.chunk(2); }, a);
  expect_remote_matches("chunk(4, 1)", [](auto x) { return x.chunk(4, 1); }, a);
  expect_remote_matches("split sizes that do not add up", [](auto x) { return x.split(std::vector<int64_t>{2, 2}); },
                        a);
  expect_remote_matches("chunk(0)", [](auto x) { return x.chunk(0); }, a);
  // The pieces are views: an in-place op on one shows in the base.
  expect_remote_matches("in-place on a split piece", [](auto x) {
    x.split(2)[1].fill_(-1);
    return x;
  }, a);
}

TEST_F(RemoteIndexing, SortAndTopk) {
  for (DType dt : {kUInt8, kInt64, kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({4, 7}, dt, 4);  // small integers: ties check stability
    expect_remote_matches("sort()", [](auto x) { return x.sort(); }, a);
    expect_remote_matches("sort(0, descending)", [](auto x) { return x.sort(0, true); }, a);
    expect_remote_matches("topk(3)", [](auto x) { return x.topk(3); }, a);
    expect_remote_matches("topk(2, 0, smallest)", [](auto x) { return x.topk(2, 0, false); }, a);
    expect_remote_matches("topk(7, -1, largest, unsorted)", [](auto x) { return x.topk(7, -1, true, false); }, a);
    expect_remote_matches("topk(k too large)", [](auto x) { return x.topk(8); }, a);
  }
  const Tensor nans = make({5}, kFloat32, {1, NAN, -2, NAN, 0});
  expect_remote_matches("sort with NaN", [](auto x) { return x.sort(); }, nans);
}

TEST_F(RemoteIndexing, CatStackWhere) {
  for (DType dt : {kInt32, kFloat32}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = sample_tensor({2, 3}, dt, 5);
    const Tensor b = sample_tensor({4, 3}, dt, 6);
    const Tensor c = sample_tensor({2, 3}, kFloat64, 7);
    expect_remote_matches("cat(0)", [](auto x, auto y) { return cat(std::vector{x, y}); }, a, b);
    expect_remote_matches("cat(-1)", [](auto x, auto y) { return cat(std::vector{x, y, x}, -1); }, a, c);
    expect_remote_matches("cat of one", [](auto x) { return cat(std::vector{x}, 1); }, a);
    expect_remote_matches("stack(0)", [](auto x, auto y) { return stack(std::vector{x, y}); }, a, c);
    expect_remote_matches("stack(2)", [](auto x, auto y) { return stack(std::vector{x, y, y}, 2); }, a, c);
    expect_remote_matches("cat shapes differ", [](auto x, auto y) { return cat(std::vector{x, y}, 1); }, a, b);
    expect_remote_matches("stack shapes differ", [](auto x, auto y) { return stack(std::vector{x, y}); }, a, b);
    const Tensor cond = make({2, 3}, kBool, {1, 0, 0, 1, 1, 0});
    expect_remote_matches("where(cond, a, b)", [](auto k, auto x, auto y) { return where(k, x, y); }, cond, a, c);
    expect_remote_matches("where (broadcast)", [](auto k, auto x, auto y) { return where(k, x, y); },
                          make({3}, kBool, {0, 1, 0}), a, sample_tensor({2, 1}, dt, 8));
    expect_remote_matches("where(cond, scalars)", [](auto k) { return where(k, 1, 2.5); }, cond);
    expect_remote_matches("where with a non-bool cond", [](auto k, auto x, auto y) { return where(k, x, y); }, a, a, c);
  }
}

TEST_F(RemoteIndexing, BadIndexingThrowsLikeTheLocalLibrary) {
  const Tensor a = sample_tensor({4, 3}, kFloat32, 9);
  expect_remote_matches("index_select with a float index",
                        [](auto x, auto i) { return x.index_select(0, i); }, a, make({2}, kFloat32, {0, 1}));
  expect_remote_matches("index_select with a 2-D index",
                        [](auto x, auto i) { return x.index_select(0, i); }, a, make({1, 2}, kInt64, {0, 1}));
  expect_remote_matches("index_select over a dim out of range",
                        [](auto x, auto i) { return x.index_select(2, i); }, a, make({1}, kInt64, {0}));
  expect_remote_matches("gather with a wrong-rank index", [](auto x, auto i) { return x.gather(1, i); }, a,
                        make({4}, kInt64, {0, 0, 0, 0}));
  expect_remote_matches("masked_fill with a non-bool mask", [](auto x, auto m) { return x.masked_fill(m, 1); }, a,
                        make({3}, kInt64, {0, 1, 0}));
  expect_remote_matches("masked_fill with a mask that does not broadcast",
                        [](auto x, auto m) { return x.masked_fill(m, 1); }, a, make({2}, kBool, {0, 1}));
  expect_remote_matches("sort over a dim out of range", [](auto x) { return x.sort(2); }, a);
}

}  // namespace
}  // namespace thd::test
