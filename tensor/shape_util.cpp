#include "tensor/shape_util.h"

#include <algorithm>
#include <sstream>

#include "tensor/check.h"

namespace thd {

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape_str(shape); }

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  return detail::broadcast_shapes(a, b, "broadcast_shapes");
}

namespace detail {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      THD_THROW(ShapeError, op,
                "shapes {} and {} are not broadcastable: dim {} has sizes {} and {}",
                shape_str(a), shape_str(b), i, da, db);
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op, bool scalar_ok) {
  int64_t n = (ndim == 0 && scalar_ok) ? 1 : ndim;
  if (dim < -n || dim >= n) {
    if (n == 0) {
      THD_THROW(IndexError, op, "dim {} is out of range: the tensor has no dimensions", dim);
    }
    THD_THROW(IndexError, op, "dim {} is out of range for a {}-d tensor (expected [{}, {}])",
              dim, ndim, -n, n - 1);
  }
  return dim < 0 ? dim + n : dim;
}

Dims wrap_dims(const Dims& dims, int64_t ndim, const char* op) {
  Dims out;
  out.reserve(dims.size());
  for (int64_t d : dims) out.push_back(wrap_dim(d, ndim, op, true));
  std::sort(out.begin(), out.end());
  auto dup = std::adjacent_find(out.begin(), out.end());
  THD_CHECK(dup == out.end(), IndexError, op, "dim {} appears more than once in dims {}", *dup,
            shape_str(dims));
  return out;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

int64_t checked_numel(const Shape& shape, const char* op) {
  int64_t n = 1;
  for (int64_t s : shape) {
    THD_CHECK(s >= 0, ValueError, op, "negative size {} in shape {}", s, shape_str(shape));
    if (s != 0 && n > INT64_MAX / s) {
      THD_THROW(ValueError, op, "shape {} has more elements than fit in int64",
                shape_str(shape));
    }
    n *= s;
  }
  return n;
}

Shape infer_shape(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t known = 1;
  int infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      THD_CHECK(infer_at < 0, ShapeError, op, "only one dim can be -1, got shape {}",
                shape_str(shape));
      infer_at = static_cast<int>(i);
    } else {
      THD_CHECK(shape[i] >= 0, ShapeError, op, "invalid size {} in shape {}", shape[i],
                shape_str(shape));
      known *= shape[i];
    }
  }
  if (infer_at >= 0) {
    THD_CHECK(known != 0 && numel % known == 0, ShapeError, op,
              "shape {} is invalid for input of size {}", shape_str(shape), numel);
    out[infer_at] = numel / known;
  } else {
    THD_CHECK(known == numel, ShapeError, op, "shape {} is invalid for input of size {}",
              shape_str(shape), numel);
  }
  return out;
}

void check_defined(const Tensor& t, const char* op, const char* what) {
  THD_CHECK(t.defined(), ValueError, op, "{} is an undefined tensor", what);
}

void throw_meta(const Tensor& t, const char* op, const char* what) {
  THD_THROW(NotImplementedError, op,
            "{} of shape {} and dtype {} is a tensor on the meta device (it describes a tensor on {}): it has "
            "no data to read or write",
            what, shape_str(t.shape()), t.dtype(), t.storage()->device().str());
}

void check_data(const Tensor& t, const char* op, const char* what) {
  check_defined(t, op, what);
  if (t.storage()->is_meta()) [[unlikely]] throw_meta(t, op, what);
}

void check_same_shape(const Tensor& a, const Tensor& b, const char* op) {
  THD_CHECK(a.shape() == b.shape(), ShapeError, op, "shapes {} and {} differ",
            shape_str(a.shape()), shape_str(b.shape()));
}

// torch's computeStride: walk the old dims in chunks that are contiguous with each
// other and match them to runs of new dims with the same element count.
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides,
                                  const Shape& new_shape) {
  Shape new_strides(new_shape.size());
  if (shape.empty()) {
    std::fill(new_strides.begin(), new_strides.end(), 1);
    return new_strides;
  }
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  if (numel == 0) {
    if (shape == new_shape) return strides;
    return contiguous_strides(new_shape);
  }
  int64_t view_d = static_cast<int64_t>(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

}  // namespace detail
}  // namespace thd
