// The matmul family on a worker against the local library: every matmul case
// (dot, matrix-vector, batched with broadcast batch dims), mm, bmm, addmm, dot, outer.
#include <gtest/gtest.h>

#include <thd/distributed.h>

#include "job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

class RemoteLinalg : public JobTest<2> {};

TEST_F(RemoteLinalg, Matmul) {
  for (DType dt : {kInt64, kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    auto s = [dt](const Shape& shape, uint32_t seed) { return sample_tensor(shape, dt, seed); };
    expect_remote_matches("1-D x 1-D", [](auto x, auto y) { return x.matmul(y); }, s({5}, 1), s({5}, 2));
    expect_remote_matches("2-D x 2-D", [](auto x, auto y) { return x.matmul(y); }, s({3, 5}, 3), s({5, 4}, 4));
    expect_remote_matches("1-D x 2-D", [](auto x, auto y) { return x.matmul(y); }, s({5}, 5), s({5, 2}, 6));
    expect_remote_matches("2-D x 1-D", [](auto x, auto y) { return x.matmul(y); }, s({3, 5}, 7), s({5}, 8));
    expect_remote_matches("batched x 2-D", [](auto x, auto y) { return x.matmul(y); }, s({2, 3, 5}, 9),
                          s({5, 4}, 10));
    expect_remote_matches("broadcast batch dims", [](auto x, auto y) { return x.matmul(y); }, s({2, 1, 3, 4}, 11),
                          s({3, 4, 2}, 12));
    expect_remote_matches("free matmul", [](auto x, auto y) { return matmul(x, y); }, s({4, 4}, 13), s({4, 4}, 14));
    expect_remote_matches("mm", [](auto x, auto y) { return x.mm(y); }, s({6, 3}, 15), s({3, 7}, 16));
    expect_remote_matches("bmm", [](auto x, auto y) { return x.bmm(y); }, s({3, 2, 4}, 17), s({3, 4, 5}, 18));
    expect_remote_matches("addmm", [](auto c, auto x, auto y) { return c.addmm(x, y); }, s({3, 5}, 19),
                          s({3, 4}, 20), s({4, 5}, 21));
    expect_remote_matches("addmm(beta, alpha), broadcast self",
                          [](auto c, auto x, auto y) { return c.addmm(x, y, 2, -3); }, s({5}, 22), s({3, 4}, 23),
                          s({4, 5}, 24));
    expect_remote_matches("dot", [](auto x, auto y) { return x.dot(y); }, s({9}, 25), s({9}, 26));
    expect_remote_matches("outer", [](auto x, auto y) { return x.outer(y); }, s({4}, 27), s({3}, 28));
  }
  expect_remote_matches("addmm(beta, alpha) in float", [](auto c, auto x, auto y) { return c.addmm(x, y, 0.5, 2.5); },
                        sample_tensor({2, 2}, kFloat32, 29), sample_tensor({2, 3}, kFloat32, 30),
                        sample_tensor({3, 2}, kFloat32, 31));
  expect_remote_matches("a larger float32 GEMM", [](auto x, auto y) { return x.mm(y); },
                        sample_tensor({64, 48}, kFloat32, 32), sample_tensor({48, 80}, kFloat32, 33));
}

TEST_F(RemoteLinalg, BadShapesAndDtypesThrowLikeTheLocalLibrary) {
  auto f = [](const Shape& shape) { return sample_tensor(shape, kFloat32, 1); };
  expect_remote_matches("mm inner dims differ", [](auto x, auto y) { return x.mm(y); }, f({2, 3}), f({4, 5}));
  expect_remote_matches("mm of 1-D", [](auto x, auto y) { return x.mm(y); }, f({3}), f({3, 2}));
  expect_remote_matches("matmul of 0-D", [](auto x, auto y) { return x.matmul(y); }, f({}), f({3}));
  expect_remote_matches("bmm batch differs", [](auto x, auto y) { return x.bmm(y); }, f({2, 2, 3}), f({3, 3, 2}));
  expect_remote_matches("dot lengths differ", [](auto x, auto y) { return x.dot(y); }, f({3}), f({4}));
  expect_remote_matches("outer of 2-D", [](auto x, auto y) { return x.outer(y); }, f({3, 1}), f({4}));
  expect_remote_matches("addmm self does not broadcast", [](auto c, auto x, auto y) { return c.addmm(x, y); },
                        f({4}), f({2, 3}), f({3, 5}));
  expect_remote_matches("mm of mixed dtypes", [](auto x, auto y) { return x.mm(y); }, f({2, 3}),
                        sample_tensor({3, 2}, kFloat64, 2));
  expect_remote_matches("mm of bool", [](auto x, auto y) { return x.mm(y); }, sample_tensor({2, 2}, kBool, 3),
                        sample_tensor({2, 2}, kBool, 4));
}

}  // namespace
}  // namespace thd::test
