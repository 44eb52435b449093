// Links the installed libthd through thd::thd and checks that what it computes is
// right, so a package that finds the wrong headers or library fails here.
#include <thd/config.h>
#include <thd/store.h>
#include <thd/tensor.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "consumer: FAILED: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  check(std::strcmp(THD_VERSION_STRING, THD_EXPECTED_VERSION) == 0,
        "config.h version matches the package version");

  auto a = thd::Tensor::arange(6, thd::kFloat32).view({2, 3});
  check(a.shape() == thd::Shape{2, 3}, "arange(6).view({2, 3}) has shape [2, 3]");
  check(a.t().select(0, 2).to_vector<float>() == std::vector<float>{2, 5},
        "transpose + select reads column 2");

  auto b = thd::Tensor::full({2, 3}, 10, thd::kFloat32);
  check((a + b).to_vector<float>() == std::vector<float>{10, 11, 12, 13, 14, 15}, "a + b");
  check((a * 2).to_vector<float>() == std::vector<float>{0, 2, 4, 6, 8, 10}, "a * 2");

  auto c = thd::Tensor::zeros({3}, thd::kInt64);
  c.copy_(a.select(0, 1));  // float -> int64 copy of row 1
  check(c.to_vector<int64_t>() == std::vector<int64_t>{3, 4, 5}, "copy_ converts row 1");

  try {
    (void)a.view({4, 2});
    check(false, "view to a wrong size throws");
  } catch (const thd::ShapeError&) {
  }

  // libthd_datachannel links and works too.
  thd::HashStore store;
  store.set("k", std::string("v"));
  check(store.add("n", 2) == 2 && store.add("n", 3) == 5, "HashStore add counts");
  check(store.num_keys() == 2, "HashStore holds two keys");

  if (failures) return 1;
  std::printf("consumer: OK (thd %s)\n", THD_VERSION_STRING);
  return 0;
}
