#include "bench/reference.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace thd::bench::ref {

void stream_add(const float* __restrict a, const float* __restrict b, float* __restrict c,
                int64_t n) {
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

void stream_add_threads(const float* a, const float* b, float* c, int64_t n, int threads) {
  threads = std::max(1, threads);
  const int64_t per = (n + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    const int64_t begin = std::min(n, t * per), end = std::min(n, begin + per);
    pool.emplace_back([=] { stream_add(a + begin, b + begin, c + begin, end - begin); });
  }
  stream_add(a, b, c, std::min(n, per));
  for (auto& th : pool) th.join();
}

float sum(const float* a, int64_t n) {
  // Independent lanes: a float reduction may not be reordered without -ffast-math, so
  // one accumulator would serialize on the add latency.
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += a[i + j];
  }
  double total = 0;
  for (; i < n; ++i) total += a[i];
  for (float x : acc) total += x;
  return static_cast<float>(total);
}

float sum_threads(const float* a, int64_t n, int threads) {
  threads = std::max(1, threads);
  const int64_t per = (n + threads - 1) / threads;
  std::vector<float> partial(static_cast<size_t>(threads), 0.0f);
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    const int64_t begin = std::min(n, t * per), end = std::min(n, begin + per);
    pool.emplace_back([=, &partial] { partial[t] = sum(a + begin, end - begin); });
  }
  partial[0] = sum(a, std::min(n, per));
  for (auto& th : pool) th.join();
  double total = 0;
  for (float p : partial) total += p;
  return static_cast<float>(total);
}

}  // namespace thd::bench::ref
