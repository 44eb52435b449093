// Tensor construction, metadata and element access.
#include <thd/tensor.h>

#include <cmath>
#include <sstream>

#include "tensor/check.h"
#include "tensor/dispatch.h"
#include "tensor/shape_util.h"

namespace thd {

using detail::check_data;
using detail::check_defined;
using detail::wrap_dim;

Tensor::Tensor(Storage storage, DType dtype, Shape shape, Shape strides, int64_t offset)
    : storage_(std::move(storage)),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset) {
  THD_CHECK(storage_ != nullptr, ValueError, "Tensor", "storage is null");
  THD_CHECK(shape_.size() == strides_.size(), ShapeError, "Tensor",
            "shape {} and strides {} have different lengths", shape_str(shape_),
            shape_str(strides_));
  int64_t numel = detail::checked_numel(shape_, "Tensor");
  THD_CHECK(offset_ >= 0, ValueError, "Tensor", "negative storage offset {}", offset_);
  if (numel == 0) return;
  // Every addressable element must lie inside the storage.
  int64_t lo = offset_, hi = offset_;
  for (size_t i = 0; i < shape_.size(); ++i) {
    int64_t span = (shape_[i] - 1) * strides_[i];
    (span < 0 ? lo : hi) += span;
  }
  int64_t capacity = static_cast<int64_t>(storage_->nbytes() / thd::element_size(dtype_));
  THD_CHECK(lo >= 0 && hi < capacity, ValueError, "Tensor",
            "shape {} with strides {} and offset {} reaches element {} but the storage "
            "holds {} elements of {}",
            shape_str(shape_), shape_str(strides_), offset_, lo < 0 ? lo : hi, capacity,
            dtype_);
}

Device Tensor::device() const {
  check_defined(*this, "device");
  return storage_->device();
}

int64_t Tensor::size(int64_t dim) const {
  return shape_[wrap_dim(dim, this->dim(), "size")];
}

int64_t Tensor::stride(int64_t dim) const {
  return strides_[wrap_dim(dim, this->dim(), "stride")];
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t s : shape_) n *= s;
  return n;
}

size_t Tensor::element_size() const { return thd::element_size(dtype_); }

size_t Tensor::nbytes() const { return static_cast<size_t>(numel()) * element_size(); }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] == 1) continue;
    if (shape_[i] == 0) return true;
    if (strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

bool Tensor::shares_storage(const Tensor& other) const {
  return defined() && other.defined() && storage_ == other.storage_;
}

void* Tensor::data_ptr() const {
  check_data(*this, "data_ptr", "self");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size());
}

Scalar Tensor::item() const {
  check_data(*this, "item", "self");
  THD_CHECK(numel() == 1, ValueError, "item",
            "a tensor with {} elements (shape {}) cannot be converted to a scalar", numel(),
            shape_str(shape_));
  // A device's value is read through a host copy, which waits for its stream.
  if (!device().is_cpu()) return cpu().item();
  return detail::dispatch_all(dtype_, "item", [&](auto tag) -> Scalar {
    using T = typename decltype(tag)::type;
    T v = *static_cast<const T*>(data_ptr());
    if constexpr (detail::is_reduced_float_v<T>) {
      return Scalar(static_cast<float>(v));
    } else {
      return Scalar(v);
    }
  });
}

namespace {

template <typename T>
std::string format_element(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";
  } else if constexpr (detail::is_float_v<T>) {
    double d = static_cast<double>(static_cast<detail::compute_t<T>>(v));
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    std::ostringstream os;
    os.precision(6);
    os << d;
    std::string s = os.str();
    if (s.find_first_of(".e") == std::string::npos) s += ".";
    return s;
  } else {
    return std::to_string(static_cast<int64_t>(v));
  }
}

// Prints at most kEdge items from each end of every dim, like torch's summarisation.
constexpr int64_t kEdge = 3;
constexpr int64_t kSummariseAbove = 1000;

template <typename T>
void format_rec(std::string& out, const T* base, const Shape& shape, const Shape& strides,
                size_t d, bool summarise) {
  if (d == shape.size()) {
    out += format_element(*base);
    return;
  }
  out += '[';
  int64_t n = shape[d];
  for (int64_t i = 0; i < n; ++i) {
    if (summarise && n > 2 * kEdge && i == kEdge) {
      out += "..., ";
      i = n - kEdge;
    }
    format_rec(out, base + i * strides[d], shape, strides, d + 1, summarise);
    if (i + 1 < n) out += d + 1 < shape.size() ? ",\n" + std::string(d + 8, ' ') : ", ";
  }
  out += ']';
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  if (is_meta()) {
    return "tensor(..., size=" + shape_str(shape_) + ", dtype=" + std::string(dtype_name(dtype_)) + ", device=meta (" +
           device().str() + "))";
  }
  std::string out = "tensor(";
  // A device's elements are printed from a host copy.
  const Tensor host = device().is_cpu() ? *this : cpu();
  detail::dispatch_all(dtype_, "str", [&](auto tag) {
    using T = typename decltype(tag)::type;
    format_rec(out, static_cast<const T*>(host.data_ptr()), host.shape(), host.strides(), 0,
               numel() > kSummariseAbove);
  });
  if (numel() == 0) out += ", size=" + shape_str(shape_);
  out += ", dtype=" + std::string(dtype_name(dtype_));
  if (!device().is_cpu()) out += ", device=" + device().str();
  return out + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace thd
