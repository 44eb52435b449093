// softmax and log_softmax along one dim, numerically stable: exp(x - max) never
// overflows, and the sum of exponentials is accumulated in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include <thd/config.h>

#include "tensor/check.h"
#include "tensor/cuda/softmax.h"
#include "tensor/dispatch.h"
#include "tensor/into_elementwise.h"
#include "tensor/into_softmax.h"
#include "tensor/op_util.h"
#include "tensor/parallel.h"
#include "tensor/shape_util.h"

namespace thd {

using namespace detail;

namespace {

// NaN-propagating max: a row holding NaN gives NaN everywhere, as torch does.
template <typename C>
C nan_max(C m, C x) {
  return (x > m || x != x) ? x : m;
}

// The input is contiguous [outer, n, inner]; the dim is the middle one.
template <typename T, bool Log>
void softmax_kernel(const T* in, T* out, int64_t outer, int64_t n, int64_t inner) {
  using C = compute_t<T>;
  // Exponentials are kept in the output between passes when it holds them exactly.
  constexpr bool kStoreExp = !Log && std::is_same_v<T, C>;
  constexpr C kNegInf = -std::numeric_limits<C>::infinity();
  if (inner == 1) {
    parallel_for(0, outer, std::max<int64_t>(1, kGrainSize / n), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* x = in + r * n;
        T* y = out + r * n;
        C m = kNegInf;
        for (int64_t k = 0; k < n; ++k) m = nan_max(m, static_cast<C>(x[k]));
        double s = 0;
        for (int64_t k = 0; k < n; ++k) {
          const C ex = std::exp(static_cast<C>(x[k]) - m);
          s += static_cast<double>(ex);
          if constexpr (kStoreExp) y[k] = ex;
        }
        if constexpr (Log) {
          const auto ls = static_cast<C>(std::log(s));
          for (int64_t k = 0; k < n; ++k) y[k] = static_cast<T>(static_cast<C>(x[k]) - m - ls);
        } else {
          const auto inv = static_cast<C>(1.0 / s);
          for (int64_t k = 0; k < n; ++k) {
            const C ex = kStoreExp ? static_cast<C>(y[k]) : std::exp(static_cast<C>(x[k]) - m);
            y[k] = static_cast<T>(ex * inv);
          }
        }
      }
    });
    return;
  }
  // The dim is not innermost: a tile of neighbouring columns moves down it together,
  // reading memory in order.
  constexpr int64_t kTile = 256;
  const int64_t tiles = (inner + kTile - 1) / kTile;
  const int64_t work = n * std::min(kTile, inner);
  const int64_t grain = std::max<int64_t>(1, kGrainSize / work);
  parallel_for(0, outer * tiles, grain, [&](int64_t b, int64_t e) {
    C m[kTile];
    double s[kTile];
    C fin[kTile];
    for (int64_t item = b; item < e; ++item) {
      const int64_t o = item / tiles, i0 = item % tiles * kTile;
      const int64_t len = std::min(kTile, inner - i0);
      const T* x = in + o * n * inner + i0;
      T* y = out + o * n * inner + i0;
      std::fill(m, m + len, kNegInf);
      std::fill(s, s + len, 0.0);
      for (int64_t k = 0; k < n; ++k) {
        for (int64_t j = 0; j < len; ++j) m[j] = nan_max(m[j], static_cast<C>(x[k * inner + j]));
      }
      for (int64_t k = 0; k < n; ++k) {
        for (int64_t j = 0; j < len; ++j) {
          const C ex = std::exp(static_cast<C>(x[k * inner + j]) - m[j]);
          s[j] += static_cast<double>(ex);
          if constexpr (kStoreExp) y[k * inner + j] = ex;
        }
      }
      for (int64_t j = 0; j < len; ++j) {
        fin[j] = Log ? static_cast<C>(std::log(s[j])) : static_cast<C>(1.0 / s[j]);
      }
      for (int64_t k = 0; k < n; ++k) {
        for (int64_t j = 0; j < len; ++j) {
          const C xv = static_cast<C>(x[k * inner + j]);
          if constexpr (Log) {
            y[k * inner + j] = static_cast<T>(xv - m[j] - fin[j]);
          } else {
            const C ex = kStoreExp ? static_cast<C>(y[k * inner + j]) : std::exp(xv - m[j]);
            y[k * inner + j] = static_cast<T>(ex * fin[j]);
          }
        }
      }
    }
  });
}

// Into a new tensor, or into *into (tensor/into_softmax.h) when that can be the
// result: an undefined tensor, with nothing written, when it cannot.
template <bool Log>
Tensor softmax_impl(const Tensor& self, int64_t dim_in, const Tensor* into = nullptr) {
  const char* op = Log ? "log_softmax" : "softmax";
  check_data(self, op);
  const int64_t d = wrap_dim(dim_in, self.dim(), op, true);
  if (!self.device().is_cpu()) {
    if (into != nullptr) return Tensor();
#if THD_WITH_CUDA
    return cuda::softmax(self, d, Log);
#else
    check_cpu_kernel(op, self);  // no CUDA tensor exists in a build without CUDA
#endif
  }
  if (into != nullptr &&
      (!is_floating_point(self.dtype()) || !writable_result(*into, self.shape(), self.dtype(), Device::cpu(), {&self}))) {
    return Tensor();
  }
  return dispatch<kFloatingSet>(self.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Tensor x = self.contiguous();
    Tensor out = into != nullptr ? *into : Tensor::empty(self.shape(), self.dtype());
    if (out.numel() == 0) return out;
    int64_t outer = 1, n = 1, inner = 1;
    for (int64_t i = 0; i < self.dim(); ++i) {
      (i < d ? outer : i == d ? n : inner) *= self.shape()[i];
    }
    softmax_kernel<T, Log>(x.data<T>(), out.data<T>(), outer, n, inner);
    return out;
  });
}

}  // namespace

Tensor Tensor::softmax(int64_t dim) const { return softmax_impl<false>(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return softmax_impl<true>(*this, dim); }

namespace detail {

bool softmax_into(const Tensor& out, const Tensor& a, int64_t dim, bool log) {
  if (!out.defined() || !a.defined()) return false;
  return (log ? softmax_impl<true>(a, dim, &out) : softmax_impl<false>(a, dim, &out)).defined();
}

}  // namespace detail

}  // namespace thd
