// Factory functions: empty, zeros, ones, full, arange, linspace, eye, from_blob.
#include <cmath>
#include <cstring>

#include <thd/config.h>

#include "tensor/check.h"
#include "tensor/into_creation.h"
#include "tensor/into_elementwise.h"
#include "tensor/loops.h"
#include "tensor/op_util.h"
#include "tensor/shape_util.h"
#include "tensor/storage_alloc.h"

#if THD_WITH_CUDA
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_stream.h"
#endif

namespace thd {

using namespace detail;

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  const int64_t numel = checked_numel(shape, "empty");
  const auto es = static_cast<int64_t>(thd::element_size(dtype));
  THD_CHECK(numel <= INT64_MAX / es, ValueError, "empty",
            "shape {} of {} needs more bytes than fit in int64", shape_str(shape), dtype);
  return Tensor(allocate_storage(static_cast<size_t>(numel * es), device), dtype, shape,
                contiguous_strides(shape), 0);
}

Tensor Tensor::meta(const Shape& shape, DType dtype, Device device) {
  const int64_t numel = checked_numel(shape, "meta");
  const auto es = static_cast<int64_t>(thd::element_size(dtype));
  THD_CHECK(numel <= INT64_MAX / es, ValueError, "meta",
            "shape {} of {} needs more bytes than fit in int64", shape_str(shape), dtype);
  return Tensor(std::make_shared<StorageImpl>(StorageImpl::Meta{}, static_cast<size_t>(numel * es), device), dtype,
                shape, contiguous_strides(shape), 0);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  // All-zero bits are 0 in every dtype.
#if THD_WITH_CUDA
  if (device.is_cuda()) {
    const int index = device.index();
    cuda::DeviceGuard guard(index);
    THD_CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), 0, t.nbytes(), cuda::current_stream(index)),
                   "zeros");
    return t;
  }
#endif
  std::memset(t.data_ptr(), 0, t.nbytes());
  return t;
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1, dtype, device);
}

Tensor Tensor::full(const Shape& shape, Scalar value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::arange(Scalar end, std::optional<DType> dtype) {
  return arange(0, end, 1, dtype);
}

namespace {

// arange, linspace and eye into a new tensor, or into *into (tensor/into_creation.h)
// when that can be the result: an undefined tensor, with nothing written, when it
// cannot. The arguments' checks come first either way.
Tensor arange_impl(const Scalar& start, const Scalar& end, const Scalar& step, std::optional<DType> dtype,
                   const Tensor* into) {
  const bool any_float =
      start.is_floating_point() || end.is_floating_point() || step.is_floating_point();
  const DType dt = dtype.value_or(any_float ? kFloat32 : kInt64);
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  THD_CHECK(std::isfinite(s) && std::isfinite(e), ValueError, "arange",
            "start ({}) and end ({}) must be finite", s, e);
  THD_CHECK(st != 0, ValueError, "arange", "step must be nonzero");
  THD_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), ValueError, "arange",
            "upper bound and larger bound inconsistent with step sign (start {}, end {}, "
            "step {})",
            s, e, st);
  // The count in 128 bits: end - start overflows int64 for bounds of opposite signs
  // near its limits, and a double count past 2^63 does not convert.
  __int128 count;
  if (any_float || is_floating_point(dt)) {
    const double c = std::ceil((e - s) / st);
    THD_CHECK(c < 0x1p62, ValueError, "arange", "range [{}, {}) with step {} has {} elements: too many", s, e, st, c);
    count = static_cast<__int128>(c);
  } else {  // exact integer arithmetic; doubles lose precision past 2^53
    const __int128 is = start.to_int64(), ie = end.to_int64(), ist = step.to_int64();
    count = ist > 0 ? (ie - is + ist - 1) / ist : (is - ie - ist - 1) / -ist;
    THD_CHECK(count < (__int128{1} << 62), ValueError, "arange", "range [{}, {}) with step {} has too many elements",
              start.to_int64(), end.to_int64(), step.to_int64());
  }
  const auto n = static_cast<int64_t>(count);
  if (into != nullptr && !writable_result(*into, {n}, dt, Device::cpu(), {})) return Tensor();
  Tensor t = into != nullptr ? *into : Tensor::empty({n}, dt);
  dispatch<kNumericSet>(dt, "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    if (any_float || is_float_v<T>) {
      for (int64_t i = 0; i < n; ++i) p[i] = convert<T>(s + static_cast<double>(i) * st);
    } else {
      // In unsigned arithmetic: start + i * step is in range for every element, but
      // i * step alone may not be.
      const auto is = static_cast<uint64_t>(start.to_int64()), ist = static_cast<uint64_t>(step.to_int64());
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<int64_t>(is + static_cast<uint64_t>(i) * ist));
    }
  });
  return t;
}

Tensor linspace_impl(const Scalar& start, const Scalar& end, int64_t steps, DType dtype, const Tensor* into) {
  THD_CHECK(steps >= 0, ValueError, "linspace", "number of steps must be non-negative, got {}",
            steps);
  if (into != nullptr && !writable_result(*into, {steps}, dtype, Device::cpu(), {})) return Tensor();
  Tensor t = into != nullptr ? *into : Tensor::empty({steps}, dtype);
  const double s = start.to_double(), e = end.to_double();
  const double step = steps > 1 ? (e - s) / static_cast<double>(steps - 1) : 0.0;
  dispatch<kNumericSet>(dtype, "linspace", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    // Fill from both ends so the last value is exactly `end`, as torch does.
    const int64_t half = steps == 1 ? 1 : steps / 2;
    for (int64_t i = 0; i < steps; ++i) {
      double v = i < half ? s + step * static_cast<double>(i)
                          : e - step * static_cast<double>(steps - 1 - i);
      p[i] = convert<T>(v);
    }
  });
  return t;
}

Tensor eye_impl(int64_t n, int64_t m, DType dtype, const Tensor* into) {
  if (m < 0) m = n;
  THD_CHECK(n >= 0, ValueError, "eye", "n must be non-negative, got {}", n);
  if (into != nullptr && !writable_result(*into, {n, m}, dtype, Device::cpu(), {})) return Tensor();
  Tensor t = into != nullptr ? *into : Tensor::empty({n, m}, dtype);
  std::memset(t.data_ptr(), 0, t.nbytes());  // all-zero bits are 0 in every dtype
  dispatch_all(dtype, "eye", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = convert<T>(1);
  });
  return t;
}

}  // namespace

Tensor Tensor::arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype) {
  return arange_impl(start, end, step, dtype, nullptr);
}

Tensor Tensor::linspace(Scalar start, Scalar end, int64_t steps, DType dtype) {
  return linspace_impl(start, end, steps, dtype, nullptr);
}

Tensor Tensor::eye(int64_t n, int64_t m, DType dtype) { return eye_impl(n, m, dtype, nullptr); }

namespace detail {

bool arange_into(const Tensor& out, const Scalar& start, const Scalar& end, const Scalar& step,
                 std::optional<DType> dtype) {
  return out.defined() && arange_impl(start, end, step, dtype, &out).defined();
}

bool linspace_into(const Tensor& out, const Scalar& start, const Scalar& end, int64_t steps, DType dtype) {
  return out.defined() && linspace_impl(start, end, steps, dtype, &out).defined();
}

bool eye_into(const Tensor& out, int64_t n, int64_t m, DType dtype) {
  return out.defined() && eye_impl(n, m, dtype, &out).defined();
}

}  // namespace detail

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, const Shape& strides,
                         StorageImpl::Deleter deleter) {
  THD_CHECK(data != nullptr || checked_numel(shape, "from_blob") == 0, ValueError, "from_blob",
            "data is null");
  const Shape st = strides.empty() ? contiguous_strides(shape) : strides;
  THD_CHECK(st.size() == shape.size(), ShapeError, "from_blob",
            "shape {} and strides {} have different lengths", shape_str(shape), shape_str(st));
  // The storage spans exactly the elements the strides can reach.
  int64_t extent = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    THD_CHECK(st[i] >= 0, ValueError, "from_blob", "negative stride {} in {}", st[i],
              shape_str(st));
    if (shape[i] == 0) {
      extent = -1;
      break;
    }
    extent += (shape[i] - 1) * st[i];
  }
  const size_t nbytes = static_cast<size_t>(extent + 1) * thd::element_size(dtype);
  auto storage = std::make_shared<StorageImpl>(data, nbytes, Device::cpu(), std::move(deleter));
  return Tensor(std::move(storage), dtype, shape, st, 0);
}

}  // namespace thd
