// index_select, gather, scatter and masked_fill.
//
// gather and index_select run through the elementwise engine with self "restrided":
// a view of self shaped like the output whose stride along `dim` is 0, so an
// element's pointer plus index * stride(dim) is the element to read. scatter instead
// walks whole lines along `dim` on one thread each, so duplicate indices never race
// (the last one in a line wins).
//
// CUDA tensors take the same checks and then the kernels of tensor/cuda/index_*.cu;
// those read int32 indices as they are rather than converting them first.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <string>

#include <thd/config.h>

#include "tensor/check.h"
#include "tensor/into_elementwise.h"
#include "tensor/into_indexing.h"
#include "tensor/loops.h"
#include "tensor/op_util.h"
#include "tensor/shape_util.h"

#if THD_WITH_CUDA
#include "tensor/cuda/index_kernels.h"
#endif

namespace thd {

using namespace detail;

namespace {

void check_index_dtype(const Tensor& index, const char* op) {
  THD_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, TypeError, op,
            "expected dtype int64 or int32 for index, got {}", index.dtype());
}

[[noreturn]] void throw_index_out_of_range(const char* op, int64_t value, int64_t dim,
                                           int64_t size) {
  THD_THROW(IndexError, op, "index {} is out of bounds for dimension {} with size {}", value, dim,
            size);
}

// Throws IndexError naming an out-of-range value; reads every index before anything
// is written, so a bad index leaves every tensor as it was. Negative values are out of
// range: these ops do not wrap them. A CUDA index is checked on its device (int32 or
// int64), which waits for the device to answer.
void check_index_range(const Tensor& index, int64_t size, int64_t dim, const char* op) {
  if (index.numel() == 0) return;
  if (index.device().is_cuda()) {
#if THD_WITH_CUDA
    if (const std::optional<int64_t> bad = cuda::find_bad_index(index, size)) {
      throw_index_out_of_range(op, *bad, dim, size);
    }
#endif
    return;
  }
  std::atomic<bool> bad{false};
  std::mutex mu;
  int64_t bad_value = 0;
  auto g = make_geometry<1>({&index}, index.shape());
  for_each_run<1>(g, [&](char** p, const int64_t* s, int64_t n) {
    if (bad.load(std::memory_order_relaxed)) return;
    const char* q = p[0];
    for (int64_t i = 0; i < n; ++i, q += s[0]) {
      const int64_t v = *reinterpret_cast<const int64_t*>(q);
      if (static_cast<uint64_t>(v) >= static_cast<uint64_t>(size)) {
        std::lock_guard lock(mu);
        if (!bad.exchange(true)) bad_value = v;
        return;
      }
    }
  });
  if (bad.load()) throw_index_out_of_range(op, bad_value, dim, size);
}

// The bytes of value as dtype (scalar_to's conversion), in the low bytes of the word:
// how the CUDA kernels, which only move elements, receive a fill value.
[[maybe_unused]] uint64_t scalar_bits(const Scalar& value, DType dtype, const char* op) {
  return dispatch_all(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = scalar_to<T>(value);
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    return bits;
  });
}

// A 0-dim tensor takes part in gather/scatter as a 1-element 1-D one (torch's
// ensure_nonempty_dim).
Tensor as_1d_if_scalar(const Tensor& t) { return t.dim() == 0 ? t.view({1}) : t; }

// `t` seen with `shape` (no larger than t's own in any dim but `dim`) and stride 0 along
// `dim`: pointer arithmetic on it reaches t's element [.., k, ..] via k * t.stride(dim).
Tensor restride(const Tensor& t, const Shape& shape, int64_t dim) {
  Shape strides = t.strides();
  strides[dim] = 0;
  return Tensor(t.storage(), t.dtype(), shape, std::move(strides), t.storage_offset());
}

// out[..] = self[.., index[..], ..] with index (int64, validated) shaped like out.
void gather_kernel(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  Tensor src = restride(self, out.shape(), dim);
  dispatch_all(self.dtype(), "gather", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t step = self.stride(dim) * static_cast<int64_t>(sizeof(T));
    nary_kernel<3>({&out, &src, &index}, [step](char** p) {
      const int64_t i = *reinterpret_cast<const int64_t*>(p[2]);
      *reinterpret_cast<T*>(p[0]) = *reinterpret_cast<const T*>(p[1] + i * step);
    });
  });
}

// out[..] = self[.., index[..], ..] for an index shaped like out, on out's device. On
// the CPU the index is int64 and already checked; a CUDA kernel checks each index as it
// reads it and the op throws the CPU's IndexError after it (out is fresh, so nothing the
// caller sees was written).
void gather_into(const Tensor& out, const Tensor& self, int64_t dim, const Tensor& index,
                 const char* op) {
#if THD_WITH_CUDA
  if (out.device().is_cuda()) {
    if (const std::optional<int64_t> bad = cuda::gather_on_device(out, self, dim, index)) {
      throw_index_out_of_range(op, *bad, dim, self.size(dim));
    }
    return;
  }
#endif
  check_cpu_kernel(op, out);
  gather_kernel(out, self, dim, index);
}

// Validated, normalized arguments of a scatter: 0-dim operands as 1-D, index int64.
struct ScatterArgs {
  int64_t dim;
  Tensor index;
  Tensor src;  // undefined for the scalar form
};

ScatterArgs check_scatter(const Tensor& self, int64_t dim_in, const Tensor& index_in,
                          const Tensor* src_in, const char* op) {
  check_data(self, op);
  check_data(index_in, op, "index");
  if (src_in) check_data(*src_in, op, "src");
  check_same_device(op, {&self, &index_in, src_in});
  const int64_t dim = wrap_dim(dim_in, self.dim(), op, true);
  check_index_dtype(index_in, op);
  if (src_in) {
    THD_CHECK(src_in->dtype() == self.dtype(), TypeError, op,
              "expected self.dtype to be equal to src.dtype, got {} and {}", self.dtype(),
              src_in->dtype());
  }
  const Tensor self1 = as_1d_if_scalar(self);
  ScatterArgs a{dim, as_1d_if_scalar(index_in).to(kInt64),
                src_in ? as_1d_if_scalar(*src_in) : Tensor()};
  if (a.index.numel() == 0) return a;  // torch checks no shapes then
  THD_CHECK(a.index.dim() == self1.dim(), ShapeError, op,
            "index tensor must have the same number of dimensions as self tensor: index {}, "
            "self {}",
            shape_str(index_in.shape()), shape_str(self.shape()));
  if (src_in) {
    THD_CHECK(a.index.dim() == a.src.dim(), ShapeError, op,
              "index tensor must have the same number of dimensions as src tensor: index {}, "
              "src {}",
              shape_str(index_in.shape()), shape_str(src_in->shape()));
  }
  for (int64_t d = 0; d < self1.dim(); ++d) {
    const bool fits_self = d == dim || a.index.size(d) <= self1.size(d);
    const bool fits_src = !src_in || a.index.size(d) <= a.src.size(d);
    THD_CHECK(fits_self && fits_src, ShapeError, op,
              "expected index {} to be no larger than self {} apart from dimension {}{}{} "
              "(dimension {} does not fit)",
              shape_str(index_in.shape()), shape_str(self.shape()), dim,
              src_in ? " and no larger than src " : "", src_in ? shape_str(src_in->shape()) : "",
              d);
  }
  check_index_range(a.index, self1.size(dim), dim, op);
  return a;
}

// Writes into self (validated by check_scatter; not aliased by the args) line by line.
void scatter_kernel(const Tensor& self_in, const ScatterArgs& a, const Scalar& value,
                    const char* op) {
  if (a.index.numel() == 0) return;
  const Tensor self = as_1d_if_scalar(self_in);
  const int64_t dim = a.dim;
  if (self.device().is_cuda()) {
#if THD_WITH_CUDA
    if (a.src.defined()) {
      cuda::scatter_on_device(self, dim, a.index, a.src);
    } else {
      cuda::scatter_fill_on_device(self, dim, a.index, scalar_bits(value, self.dtype(), op));
    }
#endif
    return;
  }
  const int64_t n = a.index.size(dim);
  const int64_t grain = std::max<int64_t>(1, kGrainSize / n);
  const int64_t istep = a.index.stride(dim) * static_cast<int64_t>(sizeof(int64_t));
  dispatch_all(self.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t sstep = self.stride(dim) * static_cast<int64_t>(sizeof(T));
    if (a.src.defined()) {
      const int64_t vstep = a.src.stride(dim) * static_cast<int64_t>(sizeof(T));
      auto g = make_line_geometry<3>({&self, &a.src, &a.index}, a.index.shape(), dim);
      for_each_run<3>(
          g,
          [&](char** p, const int64_t* s, int64_t m) {
            char* out = p[0];
            const char* src = p[1];
            const char* idx = p[2];
            for (int64_t j = 0; j < m; ++j, out += s[0], src += s[1], idx += s[2]) {
              for (int64_t k = 0; k < n; ++k) {
                const int64_t i = *reinterpret_cast<const int64_t*>(idx + k * istep);
                *reinterpret_cast<T*>(out + i * sstep) =
                    *reinterpret_cast<const T*>(src + k * vstep);
              }
            }
          },
          grain);
    } else {
      const T v = scalar_to<T>(value);
      auto g = make_line_geometry<2>({&self, &a.index}, a.index.shape(), dim);
      for_each_run<2>(
          g,
          [&](char** p, const int64_t* s, int64_t m) {
            char* out = p[0];
            const char* idx = p[1];
            for (int64_t j = 0; j < m; ++j, out += s[0], idx += s[1]) {
              for (int64_t k = 0; k < n; ++k) {
                const int64_t i = *reinterpret_cast<const int64_t*>(idx + k * istep);
                *reinterpret_cast<T*>(out + i * sstep) = v;
              }
            }
          },
          grain);
    }
  });
}

void check_fill_value(const Tensor& self, const Scalar& value, const char* op) {
  check_value_fits(value, self.dtype(), op);
}

// Whether `from` broadcasts to exactly `to`.
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  }
  return true;
}

void check_mask(const Tensor& mask, const char* op) {
  check_data(mask, op, "mask");
  THD_CHECK(mask.dtype() == kBool, TypeError, op,
            "only supports boolean masks, but got mask with dtype {}", mask.dtype());
}

// index_select and gather into a new tensor, or into *into (tensor/into_indexing.h)
// when that can be the result: an undefined tensor, with nothing written, when it
// cannot. Every check runs first, so an index the op refuses raises its error either way.
Tensor index_select_impl(const Tensor& self, int64_t dim_in, const Tensor& index_in, const Tensor* into) {
  check_data(self, "index_select");
  check_data(index_in, "index_select", "index");
  check_same_device("index_select", {&self, &index_in});
  const int64_t dim = wrap_dim(dim_in, self.dim(), "index_select", true);
  check_index_dtype(index_in, "index_select");
  THD_CHECK(index_in.dim() <= 1, IndexError, "index_select",
            "index is supposed to be a vector, got shape {}", shape_str(index_in.shape()));
  const bool on_cuda = self.device().is_cuda();
  const Tensor index = (on_cuda ? index_in : index_in.to(kInt64)).reshape({-1});
  const int64_t n = index.numel();
  if (self.dim() == 0) {
    THD_CHECK(n == 1, IndexError, "index_select",
              "index to a 0-dim tensor can have only 1 value, got {} value(s)", n);
    check_index_range(index, 1, dim, "index_select");
    return into != nullptr ? Tensor() : self.clone();
  }
  Shape shape = self.shape();
  shape[dim] = n;
  // The CUDA gather checks the indices it reads, unless it reads none.
  if (!on_cuda || n == 0 || self.numel() == 0) {
    check_index_range(index, self.size(dim), dim, "index_select");
  }
  // A CUDA gather finds a bad index only as it writes: the kept result is the CPU's.
  if (into != nullptr &&
      (on_cuda || !writable_result(*into, shape, self.dtype(), self.device(), {&self, &index_in}))) {
    return Tensor();
  }
  Tensor out = into != nullptr ? *into : Tensor::empty(shape, self.dtype(), self.device());
  if (out.numel() == 0) return out;
  // The index seen with the output's shape: it varies along dim only.
  Shape index_strides(shape.size(), 0);
  index_strides[dim] = index.stride(0);
  const Tensor index_r(index.storage(), index.dtype(), shape, index_strides,
                       index.storage_offset());
  gather_into(out, self, dim, index_r, "index_select");
  return out;
}

Tensor gather_impl(const Tensor& input, int64_t dim_in, const Tensor& index_in, const Tensor* into) {
  check_data(input, "gather");
  check_data(index_in, "gather", "index");
  check_same_device("gather", {&input, &index_in});
  const int64_t dim = wrap_dim(dim_in, input.dim(), "gather", true);
  check_index_dtype(index_in, "gather");
  const bool on_cuda = input.device().is_cuda();
  const Tensor self = as_1d_if_scalar(input);
  const Tensor index = on_cuda ? as_1d_if_scalar(index_in) : as_1d_if_scalar(index_in).to(kInt64);
  THD_CHECK(index.dim() == self.dim(), ShapeError, "gather",
            "index tensor must have the same number of dimensions as input tensor: index {}, "
            "input {}",
            shape_str(index_in.shape()), shape_str(input.shape()));
  for (int64_t d = 0; d < self.dim(); ++d) {
    THD_CHECK(d == dim || index.size(d) <= self.size(d), ShapeError, "gather",
              "size does not match at dimension {}: expected index {} to be no larger than "
              "input {} apart from dimension {}",
              d, shape_str(index_in.shape()), shape_str(input.shape()), dim);
  }
  // The CUDA gather checks every index as it reads it.
  if (!on_cuda) check_index_range(index, self.size(dim), dim, "gather");
  if (into != nullptr &&
      (on_cuda || !writable_result(*into, index_in.shape(), input.dtype(), input.device(), {&input, &index_in}))) {
    return Tensor();
  }
  Tensor out = into != nullptr ? into->view(index.shape()) : Tensor::empty(index.shape(), input.dtype(), input.device());
  if (out.numel() > 0) gather_into(out, self, dim, index, "gather");
  return into != nullptr ? *into : out.view(index_in.shape());
}

}  // namespace

Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return index_select_impl(*this, dim, index, nullptr);
}

Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return gather_impl(*this, dim, index, nullptr); }

namespace detail {

bool index_into(IntoIndex kind, const Tensor& out, const Tensor& a, int64_t dim, const Tensor& index) {
  if (!out.defined() || !a.defined() || !index.defined()) return false;
  switch (kind) {
    case IntoIndex::IndexSelect: return index_select_impl(a, dim, index, &out).defined();
    case IntoIndex::Gather: return gather_impl(a, dim, index, &out).defined();
  }
  return false;
}

}  // namespace detail

Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Tensor& src) {
  ScatterArgs a = check_scatter(*this, dim, index, &src, "scatter_");
  check_writable(*this, "scatter_");
  // Every element of src and index must be read before any write can reach it.
  if (memory_overlaps(a.src, *this)) a.src = a.src.clone();
  if (memory_overlaps(a.index, *this)) a.index = a.index.clone();
  scatter_kernel(*this, a, Scalar(), "scatter_");
  return *this;
}

Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, Scalar value) {
  ScatterArgs a = check_scatter(*this, dim, index, nullptr, "scatter_");
  check_fill_value(*this, value, "scatter_");
  check_writable(*this, "scatter_");
  if (memory_overlaps(a.index, *this)) a.index = a.index.clone();
  scatter_kernel(*this, a, value, "scatter_");
  return *this;
}

Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  ScatterArgs a = check_scatter(*this, dim, index, &src, "scatter");
  Tensor out = clone();
  scatter_kernel(out, a, Scalar(), "scatter");
  return out;
}

Tensor Tensor::scatter(int64_t dim, const Tensor& index, Scalar value) const {
  ScatterArgs a = check_scatter(*this, dim, index, nullptr, "scatter");
  check_fill_value(*this, value, "scatter");
  Tensor out = clone();
  scatter_kernel(out, a, value, "scatter");
  return out;
}

Tensor& Tensor::masked_fill_(const Tensor& mask_in, Scalar value) {
  check_data(*this, "masked_fill_");
  check_mask(mask_in, "masked_fill_");
  check_same_device("masked_fill_", {this, &mask_in});
  THD_CHECK(broadcasts_to(mask_in.shape(), shape_), ShapeError, "masked_fill_",
            "mask of shape {} does not broadcast to self's shape {}", shape_str(mask_in.shape()),
            shape_str(shape_));
  check_fill_value(*this, value, "masked_fill_");
  check_writable(*this, "masked_fill_");
  const Tensor mask = unalias_input(mask_in, *this);
  if (device().is_cuda()) {
#if THD_WITH_CUDA
    cuda::masked_fill_on_device(*this, mask, scalar_bits(value, dtype_, "masked_fill_"));
#endif
    return *this;
  }
  dispatch_all(dtype_, "masked_fill_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = scalar_to<T>(value);
    nary_kernel<2>({this, &mask}, [v](char** p) {
      if (*reinterpret_cast<const bool*>(p[1])) *reinterpret_cast<T*>(p[0]) = v;
    });
  });
  return *this;
}

Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const {
  check_data(*this, "masked_fill");
  check_mask(mask, "masked_fill");
  check_same_device("masked_fill", {this, &mask});
  check_fill_value(*this, value, "masked_fill");
  // Out of place, self broadcasts to the mask too (torch's expand_outplace).
  Shape shape = shape_.size() >= mask.shape().size() ? shape_ : mask.shape();
  const size_t off_self = shape.size() - shape_.size(), off_mask = shape.size() - mask.dim();
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t a = i < off_self ? 1 : shape_[i - off_self];
    const int64_t b = i < off_mask ? 1 : mask.shape()[i - off_mask];
    THD_CHECK(a == b || a == 1 || b == 1, ShapeError, "masked_fill",
              "mask of shape {} and self of shape {} do not broadcast together",
              shape_str(mask.shape()), shape_str(shape_));
    shape[i] = a == 1 ? b : a;
  }
  Tensor out = empty(shape, dtype_, device());
  out.copy_(*this);
  out.masked_fill_(mask, value);
  return out;
}

}  // namespace thd
