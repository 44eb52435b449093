// copy_, fill_, dtype and device conversion and the copies built on them.
#include <algorithm>
#include <cstring>

#include <thd/config.h>

#include "tensor/check.h"
#include "tensor/loops.h"
#include "tensor/op_util.h"
#include "tensor/shape_util.h"

#if THD_WITH_CUDA
#include "tensor/cuda/copy_kernel.h"
#include "tensor/cuda/transfer.h"
#endif

namespace thd {

using namespace detail;

Tensor& Tensor::copy_(const Tensor& src_in) {
  check_data(*this, "copy_", "destination");
  check_data(src_in, "copy_", "source");
  THD_CHECK(src_in.shape() == shape_ || broadcast_shapes(shape_, src_in.shape(), "copy_") == shape_,
            ShapeError, "copy_", "source of shape {} does not broadcast to the destination's shape {}",
            shape_str(src_in.shape()), shape_str(shape_));
  check_writable(*this, "copy_");
  if (same_view(*this, src_in) || numel() == 0) return *this;
  // A source that overlaps the destination is read from a copy (unalias_input); the
  // common case keeps a reference, not a copy of the handle.
  Tensor unaliased;
  if (memory_overlaps(src_in, *this)) unaliased = src_in.clone();
  const Tensor& src = unaliased.defined() ? unaliased : src_in;
  if (!device().is_cpu() || !src.device().is_cpu()) [[unlikely]] {
#if THD_WITH_CUDA
    cuda::copy_tensor(*this, src);
    return *this;
#else
    // Only a StorageImpl wrapping foreign memory can name a CUDA device here.
    check_cpu_kernel("copy_", *this);
    check_cpu_kernel("copy_", src);
#endif
  }
  if (src.dtype() == dtype_ && src.shape() == shape_ && src.is_contiguous() && is_contiguous()) {
    const char* s = static_cast<const char*>(src.data_ptr());
    char* d = static_cast<char*>(data_ptr());
    const int64_t es = static_cast<int64_t>(element_size());
    parallel_for(0, numel(), kGrainSize * 4, [&](int64_t b, int64_t e) {
      std::memcpy(d + b * es, s + b * es, static_cast<size_t>((e - b) * es));
    });
    return *this;
  }
  dispatch_all(dtype_, "copy_", [&](auto out_tag) {
    using Out = typename decltype(out_tag)::type;
    dispatch_all(src.dtype(), "copy_", [&](auto in_tag) {
      using In = typename decltype(in_tag)::type;
      auto g = make_geometry<2>({this, &src}, shape_);
      for_each_run<2>(g, [&](char** p, const int64_t* s, int64_t n) {
        char* po = p[0];
        const char* pi = p[1];
        if (s[0] == sizeof(Out) && s[1] == sizeof(In)) {
          Out* o = reinterpret_cast<Out*>(po);
          const In* a = reinterpret_cast<const In*>(pi);
          for (int64_t i = 0; i < n; ++i) o[i] = convert<Out>(a[i]);
          return;
        }
        for (int64_t i = 0; i < n; ++i, po += s[0], pi += s[1]) {
          *reinterpret_cast<Out*>(po) = convert<Out>(*reinterpret_cast<const In*>(pi));
        }
      });
    });
  });
  return *this;
}

Tensor& Tensor::fill_(Scalar value) {
  check_data(*this, "fill_", "self");
  check_writable(*this, "fill_");
  check_value_fits(value, dtype_, "fill_");
  if (!device().is_cpu()) [[unlikely]] {
#if THD_WITH_CUDA
    if (numel() > 0) cuda::fill_on_device(*this, value, "fill_");
    return *this;
#else
    check_cpu_kernel("fill_", *this);
#endif
  }
  dispatch_all(dtype_, "fill_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = scalar_to<T>(value);
    if (is_contiguous()) {
      for_each_flat<1>({static_cast<char*>(data_ptr())}, {int64_t{sizeof(T)}}, numel(),
                       [v](char** p, const int64_t*, int64_t n) {
                         std::fill_n(reinterpret_cast<T*>(p[0]), n, v);
                       });
      return;
    }
    nary_kernel<1>({this}, [v](char** p) { *reinterpret_cast<T*>(p[0]) = v; });
  });
  return *this;
}

Tensor Tensor::to(DType dtype, bool copy) const {
  check_defined(*this, "to");
  if (dtype == dtype_ && !copy) return *this;
  if (is_meta()) return meta(shape_, dtype, device());
  Tensor out = empty(shape_, dtype, device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device device, bool copy) const {
  check_defined(*this, "to");
  if (device == this->device() && !copy) return *this;
  if (is_meta()) return meta(shape_, dtype_, device);
  Tensor out = empty(shape_, dtype_, device);
  out.copy_(*this);
  return out;
}

// contiguous() and clone() keep the tensor on its device: empty() allocates there and
// copy_ copies within it. to(), contiguous() and clone() of a meta tensor make a meta
// tensor: there are no elements to copy, only metadata to describe.
Tensor Tensor::contiguous() const {
  check_defined(*this, "contiguous");
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  check_defined(*this, "clone");
  if (is_meta()) return meta(shape_, dtype_, device());
  Tensor out = empty(shape_, dtype_, device());
  out.copy_(*this);
  return out;
}

}  // namespace thd
