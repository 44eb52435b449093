// Ops that return views: new shape and strides over the same storage, no copy.
#include <algorithm>
#include <numeric>

#include "tensor/check.h"
#include "tensor/shape_util.h"

namespace thd {

using namespace detail;

Tensor Tensor::view(const Shape& shape) const {
  check_defined(*this, "view");
  Shape new_shape = infer_shape(shape, numel(), "view");
  auto st = view_strides(shape_, strides_, new_shape);
  THD_CHECK(st.has_value(), ShapeError, "view",
            "view size {} is not compatible with input tensor's size {} and stride {} (at "
            "least one dimension spans across two contiguous subspaces); use .reshape(...) "
            "instead",
            shape_str(new_shape), shape_str(shape_), shape_str(strides_));
  return Tensor(storage_, dtype_, std::move(new_shape), std::move(*st), offset_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  check_defined(*this, "reshape");
  Shape new_shape = infer_shape(shape, numel(), "reshape");
  if (auto st = view_strides(shape_, strides_, new_shape)) {
    return Tensor(storage_, dtype_, std::move(new_shape), std::move(*st), offset_);
  }
  return clone().view(new_shape);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  check_defined(*this, "flatten");
  if (dim() == 0) return reshape({1});
  int64_t s = wrap_dim(start_dim, dim(), "flatten");
  int64_t e = wrap_dim(end_dim, dim(), "flatten");
  THD_CHECK(s <= e, IndexError, "flatten", "start_dim {} comes after end_dim {}", start_dim,
            end_dim);
  Shape ns(shape_.begin(), shape_.begin() + s);
  int64_t m = 1;
  for (int64_t i = s; i <= e; ++i) m *= shape_[i];
  ns.push_back(m);
  ns.insert(ns.end(), shape_.begin() + e + 1, shape_.end());
  return reshape(ns);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  check_defined(*this, "transpose");
  if (dim() == 0) {
    wrap_dim(dim0, 0, "transpose", true);
    wrap_dim(dim1, 0, "transpose", true);
    return *this;
  }
  int64_t a = wrap_dim(dim0, dim(), "transpose");
  int64_t b = wrap_dim(dim1, dim(), "transpose");
  Shape sh = shape_, st = strides_;
  std::swap(sh[a], sh[b]);
  std::swap(st[a], st[b]);
  return Tensor(storage_, dtype_, std::move(sh), std::move(st), offset_);
}

Tensor Tensor::t() const {
  check_defined(*this, "t");
  THD_CHECK(dim() <= 2, ShapeError, "t", "expects a tensor with <= 2 dims, got {} dims (shape {})",
            dim(), shape_str(shape_));
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::permute(const Dims& dims) const {
  check_defined(*this, "permute");
  THD_CHECK(static_cast<int64_t>(dims.size()) == dim(), ShapeError, "permute",
            "number of dims in {} does not match the tensor's {} dims", shape_str(dims), dim());
  Shape sh(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    THD_CHECK(!seen[d], IndexError, "permute", "dim {} repeats in {}", d, shape_str(dims));
    seen[d] = true;
    sh[i] = shape_[d];
    st[i] = strides_[d];
  }
  return Tensor(storage_, dtype_, std::move(sh), std::move(st), offset_);
}

Tensor Tensor::slice(int64_t dim_in, int64_t start, int64_t end, int64_t step) const {
  check_defined(*this, "slice");
  THD_CHECK(dim() > 0, IndexError, "slice", "cannot slice a 0-dim tensor");
  int64_t d = wrap_dim(dim_in, dim(), "slice");
  THD_CHECK(step > 0, ValueError, "slice", "step must be positive, got {}", step);
  const int64_t n = shape_[d];
  // Python slice semantics: negatives count from the end, out of range clamps.
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sh = shape_, st = strides_;
  sh[d] = (end - start + step - 1) / step;
  st[d] = strides_[d] * step;
  return Tensor(storage_, dtype_, std::move(sh), std::move(st), offset_ + start * strides_[d]);
}

Tensor Tensor::narrow(int64_t dim_in, int64_t start, int64_t length) const {
  check_defined(*this, "narrow");
  THD_CHECK(dim() > 0, IndexError, "narrow", "cannot narrow a 0-dim tensor");
  int64_t d = wrap_dim(dim_in, dim(), "narrow");
  const int64_t n = shape_[d];
  THD_CHECK(start >= -n && start <= n, IndexError, "narrow",
            "start {} is out of range for dim {} of size {}", start, d, n);
  if (start < 0) start += n;
  THD_CHECK(length >= 0 && start + length <= n, IndexError, "narrow",
            "start ({}) + length ({}) exceeds dim {} of size {}", start, length, d, n);
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t dim_in, int64_t index) const {
  check_defined(*this, "select");
  THD_CHECK(dim() > 0, IndexError, "select", "cannot select from a 0-dim tensor");
  int64_t d = wrap_dim(dim_in, dim(), "select");
  const int64_t n = shape_[d];
  THD_CHECK(index >= -n && index < n, IndexError, "select",
            "index {} is out of range for dim {} of size {}", index, d, n);
  if (index < 0) index += n;
  Shape sh = shape_, st = strides_;
  sh.erase(sh.begin() + d);
  st.erase(st.begin() + d);
  return Tensor(storage_, dtype_, std::move(sh), std::move(st), offset_ + index * strides_[d]);
}

Tensor Tensor::expand(const Shape& shape) const {
  check_defined(*this, "expand");
  THD_CHECK(shape.size() >= shape_.size(), ShapeError, "expand",
            "the target shape {} has fewer dims than the tensor's shape {}", shape_str(shape),
            shape_str(shape_));
  const size_t off = shape.size() - shape_.size();
  Shape sh(shape.size()), st(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < off) {
      THD_CHECK(shape[i] >= 0, ShapeError, "expand",
                "size -1 is not allowed in a leading, new dim (target shape {})",
                shape_str(shape));
      sh[i] = shape[i];
      st[i] = 0;
      continue;
    }
    const int64_t cur = shape_[i - off];
    const int64_t want = shape[i] == -1 ? cur : shape[i];
    if (cur == want) {
      sh[i] = cur;
      st[i] = strides_[i - off];
    } else {
      THD_CHECK(cur == 1, ShapeError, "expand",
                "the expanded size ({}) must match the existing size ({}) at non-singleton "
                "dim {}; target shape {}, tensor shape {}",
                want, cur, i, shape_str(shape), shape_str(shape_));
      THD_CHECK(want >= 0, ShapeError, "expand", "invalid size {} in target shape {}", want,
                shape_str(shape));
      sh[i] = want;
      st[i] = 0;
    }
  }
  return Tensor(storage_, dtype_, std::move(sh), std::move(st), offset_);
}

Tensor Tensor::squeeze() const {
  check_defined(*this, "squeeze");
  Shape sh, st;
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (shape_[i] != 1) {
      sh.push_back(shape_[i]);
      st.push_back(strides_[i]);
    }
  }
  return Tensor(storage_, dtype_, std::move(sh), std::move(st), offset_);
}

Tensor Tensor::squeeze(int64_t dim_in) const {
  check_defined(*this, "squeeze");
  int64_t d = wrap_dim(dim_in, dim(), "squeeze", true);
  if (dim() == 0 || shape_[d] != 1) return *this;
  Shape sh = shape_, st = strides_;
  sh.erase(sh.begin() + d);
  st.erase(st.begin() + d);
  return Tensor(storage_, dtype_, std::move(sh), std::move(st), offset_);
}

Tensor Tensor::unsqueeze(int64_t dim_in) const {
  check_defined(*this, "unsqueeze");
  int64_t d = wrap_dim(dim_in, dim() + 1, "unsqueeze");
  Shape sh = shape_, st = strides_;
  int64_t stride = d < dim() ? shape_[d] * strides_[d] : 1;
  sh.insert(sh.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return Tensor(storage_, dtype_, std::move(sh), std::move(st), offset_);
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim_in) const {
  check_defined(*this, "split");
  THD_CHECK(dim() > 0, IndexError, "split", "cannot split a 0-dim tensor");
  int64_t d = wrap_dim(dim_in, dim(), "split");
  const int64_t n = shape_[d];
  THD_CHECK(split_size > 0 || (split_size == 0 && n == 0), ValueError, "split",
            "split_size must be positive, got {} (dim {} has size {})", split_size, d, n);
  std::vector<Tensor> out;
  if (n == 0) {
    out.push_back(*this);
    return out;
  }
  for (int64_t s = 0; s < n; s += split_size) out.push_back(narrow(d, s, std::min(split_size, n - s)));
  return out;
}

std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, int64_t dim_in) const {
  check_defined(*this, "split");
  THD_CHECK(dim() > 0, IndexError, "split", "cannot split a 0-dim tensor");
  int64_t d = wrap_dim(dim_in, dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    THD_CHECK(s >= 0, ValueError, "split", "split sizes must be non-negative, got {}",
              shape_str(sizes));
    total += s;
  }
  THD_CHECK(total == shape_[d], ShapeError, "split",
            "split sizes {} sum to {} but dim {} has size {}", shape_str(sizes), total, d,
            shape_[d]);
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim_in) const {
  check_defined(*this, "chunk");
  THD_CHECK(chunks > 0, ValueError, "chunk", "chunks must be positive, got {}", chunks);
  THD_CHECK(dim() > 0, IndexError, "chunk", "cannot chunk a 0-dim tensor");
  int64_t d = wrap_dim(dim_in, dim(), "chunk");
  const int64_t n = shape_[d];
  const int64_t size = (n + chunks - 1) / chunks;
  return split(size == 0 ? 1 : size, d);
}

}  // namespace thd
