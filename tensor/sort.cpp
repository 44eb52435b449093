// sort and topk: each line along `dim` is copied into a buffer of (value, position)
// pairs, ordered with the standard algorithms, and written back; lines run in
// parallel. Comparisons happen in compute_t (float for the 16-bit floats) and NaN
// ranks above every other value, as in torch. CUDA tensors are sorted on their
// device by tensor/cuda/sort.cu, with the same order.
#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include <thd/config.h>

#include "tensor/check.h"
#include "tensor/into_elementwise.h"
#include "tensor/into_sort.h"
#include "tensor/loops.h"
#include "tensor/op_util.h"
#include "tensor/shape_util.h"

#if THD_WITH_CUDA
#include "tensor/cuda/sort_kernels.h"
#endif

namespace thd {

using namespace detail;

namespace {

template <typename C>
bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(v);
  } else {
    return false;
  }
}

// Strict weak orders on values: NaNs are equal to each other and above the rest.
template <typename C>
bool less_nan_last(C a, C b) {
  return a < b || (is_nan(b) && !is_nan(a));
}
template <typename C>
bool greater_nan_first(C a, C b) {
  return a > b || (is_nan(a) && !is_nan(b));
}

// Calls order(buffer) on every line of self along dim, where buffer holds the line's
// (value, position) pairs, then writes the first values.size(dim) pairs to the line of
// values and indices.
template <typename T, typename Order>
void for_each_sorted_line(const Tensor& self, int64_t dim, const Tensor& values,
                          const Tensor& indices, Order order) {
  using C = compute_t<T>;
  const int64_t n = self.size(dim);
  const int64_t k = values.size(dim);
  const int64_t in_step = self.stride(dim) * static_cast<int64_t>(sizeof(T));
  const int64_t v_step = values.stride(dim) * static_cast<int64_t>(sizeof(T));
  const int64_t i_step = indices.stride(dim) * static_cast<int64_t>(sizeof(int64_t));
  auto g = make_line_geometry<3>({&values, &indices, &self}, self.shape(), dim);
  // A line costs about n log n; aim for kGrainSize element visits per chunk.
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(n, 1));
  for_each_run<3>(
      g,
      [&](char** p, const int64_t* s, int64_t lines) {
        std::vector<std::pair<C, int64_t>> buf(static_cast<size_t>(n));
        char* vp = p[0];
        char* ip = p[1];
        const char* sp = p[2];
        for (int64_t l = 0; l < lines; ++l, vp += s[0], ip += s[1], sp += s[2]) {
          for (int64_t j = 0; j < n; ++j) {
            buf[j] = {static_cast<C>(*reinterpret_cast<const T*>(sp + j * in_step)), j};
          }
          order(buf);
          for (int64_t j = 0; j < k; ++j) {
            *reinterpret_cast<T*>(vp + j * v_step) = static_cast<T>(buf[j].first);
            *reinterpret_cast<int64_t*>(ip + j * i_step) = buf[j].second;
          }
        }
      },
      grain);
}

// Whether `values` and `indices` can be the results of shape on the CPU.
bool take_results(const Tensor& values, const Tensor& indices, const Tensor& self, const Shape& shape) {
  return self.device().is_cpu() && writable_result(values, shape, self.dtype(), Device::cpu(), {&self}) &&
         writable_result(indices, shape, kInt64, Device::cpu(), {&self}) && !values.shares_storage(indices);
}

// sort and topk into new tensors, or into the `into` pair (tensor/into_sort.h) when it
// can hold the results: undefined tensors, with nothing written, when it cannot.
using Into = std::pair<const Tensor*, const Tensor*>;

std::pair<Tensor, Tensor> sort_impl(const Tensor& self, int64_t dim_in, bool descending, const Into* into) {
  check_data(self, "sort");
  const int64_t dim = wrap_dim(dim_in, self.dim(), "sort", true);
  if (into != nullptr && !take_results(*into->first, *into->second, self, self.shape())) return {};
  Tensor values = into != nullptr ? *into->first : Tensor::empty(self.shape(), self.dtype(), self.device());
  Tensor indices = into != nullptr ? *into->second : Tensor::empty(self.shape(), kInt64, self.device());
  if (self.numel() == 0) return {values, indices};
  if (self.dim() == 0) {
    values.copy_(self);
    indices.fill_(0);
    return {values, indices};
  }
  if (self.device().is_cuda()) {
#if THD_WITH_CUDA
    cuda::sort_on_device(self, dim, descending, values, indices);
#endif
    return {values, indices};
  }
  dispatch_all(self.dtype(), "sort", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Pair = std::pair<compute_t<T>, int64_t>;
    // stable_sort keeps equal keys (and NaNs) in input order in both directions.
    if (descending) {
      for_each_sorted_line<T>(self, dim, values, indices, [](std::vector<Pair>& b) {
        std::stable_sort(b.begin(), b.end(), [](const Pair& x, const Pair& y) {
          return greater_nan_first(x.first, y.first);
        });
      });
    } else {
      for_each_sorted_line<T>(self, dim, values, indices, [](std::vector<Pair>& b) {
        std::stable_sort(b.begin(), b.end(), [](const Pair& x, const Pair& y) {
          return less_nan_last(x.first, y.first);
        });
      });
    }
  });
  return {values, indices};
}

std::pair<Tensor, Tensor> topk_impl(const Tensor& self, int64_t k, int64_t dim_in, bool largest, bool sorted,
                                    const Into* into) {
  check_data(self, "topk");
  THD_CHECK(dtype_in(self.dtype(), kNumericSet), TypeError, "topk",
            "topk does not support dtype {} (as torch)", self.dtype());
  const int64_t dim = wrap_dim(dim_in, self.dim(), "topk", true);
  const int64_t n = self.dim() == 0 ? 1 : self.size(dim);
  THD_CHECK(k >= 0 && k <= n, IndexError, "topk",
            "selected index k out of range: k = {} but dimension {} has size {}", k, dim, n);
  if (self.dim() == 0) {
    if (into != nullptr) return {};
    // A 0-dim tensor is its own top-1; its top-0 is an empty 1-D tensor.
    if (k == 0) return {Tensor::empty({0}, self.dtype(), self.device()), Tensor::empty({0}, kInt64, self.device())};
    return {self.clone(), Tensor::zeros({}, kInt64, self.device())};
  }
  Shape shape = self.shape();
  shape[dim] = k;
  if (into != nullptr && !take_results(*into->first, *into->second, self, shape)) return {};
  Tensor values = into != nullptr ? *into->first : Tensor::empty(shape, self.dtype(), self.device());
  Tensor indices = into != nullptr ? *into->second : Tensor::empty(shape, kInt64, self.device());
  if (values.numel() == 0) return {values, indices};
  if (self.device().is_cuda()) {
    // The first k of the stable sort: the CPU's choice among ties, and its order when
    // sorted (unsorted, the order is unspecified, and this one serves).
#if THD_WITH_CUDA
    cuda::sort_on_device(self, dim, largest, values, indices);
#endif
    return {values, indices};
  }
  dispatch<kNumericSet>(self.dtype(), "topk", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Pair = std::pair<compute_t<T>, int64_t>;
    // Ties go to the lower position, so the result is deterministic and, when sorted,
    // equals the first k of a stable sort.
    auto select = [k, n, sorted](std::vector<Pair>& b, auto before) {
      if (k < n) std::nth_element(b.begin(), b.begin() + k, b.end(), before);
      if (sorted) std::sort(b.begin(), b.begin() + k, before);
    };
    if (largest) {
      for_each_sorted_line<T>(self, dim, values, indices, [&](std::vector<Pair>& b) {
        select(b, [](const Pair& x, const Pair& y) {
          return greater_nan_first(x.first, y.first) ||
                 (!greater_nan_first(y.first, x.first) && x.second < y.second);
        });
      });
    } else {
      for_each_sorted_line<T>(self, dim, values, indices, [&](std::vector<Pair>& b) {
        select(b, [](const Pair& x, const Pair& y) {
          return less_nan_last(x.first, y.first) ||
                 (!less_nan_last(y.first, x.first) && x.second < y.second);
        });
      });
    }
  });
  return {values, indices};
}

}  // namespace

std::pair<Tensor, Tensor> Tensor::sort(int64_t dim, bool descending) const {
  return sort_impl(*this, dim, descending, nullptr);
}

std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return topk_impl(*this, k, dim, largest, sorted, nullptr);
}

namespace detail {

bool sort_into(const Tensor& values, const Tensor& indices, const Tensor& a, int64_t dim, bool descending) {
  if (!values.defined() || !indices.defined() || !a.defined()) return false;
  const Into into{&values, &indices};
  return sort_impl(a, dim, descending, &into).first.defined();
}

bool topk_into(const Tensor& values, const Tensor& indices, const Tensor& a, int64_t k, int64_t dim, bool largest,
               bool sorted) {
  if (!values.defined() || !indices.defined() || !a.defined()) return false;
  const Into into{&values, &indices};
  return topk_impl(a, k, dim, largest, sorted, &into).first.defined();
}

}  // namespace detail

}  // namespace thd
