// A first look at thd's tensor library: create tensors, compute, read the results.
// Each line shows the value computed next to the value expected, so the output can
// be checked by eye; the program exits non-zero if any of them differ.
//
// (The distributed runtime, with tensors living on worker processes, comes later.
// Its handles use the same operations shown here.)
#include <thd/tensor.h>

#include <cmath>
#include <cstdio>

namespace {

bool all_ok = true;

void report(const char* what, double got, double expected) {
  bool ok = std::fabs(got - expected) <= 1e-6 * (1.0 + std::fabs(expected));
  all_ok = all_ok && ok;
  std::printf("  %-28s = %g (expected %g)%s\n", what, got, expected, ok ? "" : "  <-- WRONG");
}

}  // namespace

int main() {
  using thd::Tensor;
  std::printf("thd quickstart: a few tensor ops, each result next to the value expected\n\n");

  // 0, 1, ..., 9 as int64, like torch.arange(10).
  Tensor r = Tensor::arange(10);
  report("sum of r = arange(10)", r.sum().item<double>(), 45);

  // Views share memory: g is r seen as a 2x5 grid, g.t() its transpose.
  Tensor g = r.view({2, 5});
  report("g = r.view(2, 5); g[1][3]", g.select(0, 1).select(0, 3).item<double>(), 8);
  report("sum of g.t()[4]", g.t().select(0, 4).sum().item<double>(), 4 + 9);

  // Elementwise ops broadcast and promote like torch: int64 * 0.5 is float32.
  report("sum of r * 0.5", (r * 0.5).sum().item<double>(), 22.5);
  Tensor tens = Tensor::arange(5) * 10;  // [0, 10, 20, 30, 40], added to each row of g
  report("(g + arange(5) * 10)[1][4]", (g + tens).select(0, 1).select(0, 4).item<double>(),
         9 + 40);

  // A small matrix product: [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]].
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector<float>({5, 6, 7, 8}, {2, 2});
  Tensor c = a.matmul(b);
  std::printf("\na @ b, with a = [[1, 2], [3, 4]] and b = [[5, 6], [7, 8]]:\n%s\n",
              c.str().c_str());
  report("(a @ b)[0][0]", c.select(0, 0).select(0, 0).item<double>(), 19);
  report("(a @ b)[1][1]", c.select(0, 1).select(0, 1).item<double>(), 50);
  report("sum of a @ b", c.sum().item<double>(), 19 + 22 + 43 + 50);

  std::printf("\nquickstart: %s\n", all_ok ? "OK" : "FAILED");
  return all_ok ? 0 : 1;
}
