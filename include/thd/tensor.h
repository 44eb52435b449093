// thd::Tensor: a dense strided n-dimensional array with refcounted storage.
//
// A Tensor is a cheap handle (copying it shares the data, like torch.Tensor). Views
// (view, transpose, slice, expand, ...) share storage with their base; everything
// else returns a new tensor, and methods ending in '_' work in place.
//
// Semantics follow torch: NumPy broadcasting, torch's type promotion, negative dims
// count from the end. Bad input throws a thd::Error subclass (error.h) naming the op,
// the shapes and dtypes involved and what was expected, and leaves every tensor as it
// was.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <thd/device.h>
#include <thd/dtype.h>
#include <thd/error.h>
#include <thd/generator.h>
#include <thd/scalar.h>
#include <thd/storage.h>

namespace thd {

class DistributedTensor;  // <thd/distributed.h>

using Shape = std::vector<int64_t>;
using Dims = std::vector<int64_t>;

class Tensor {
 public:
  // An undefined tensor: every op on it throws.
  Tensor() = default;

  // ---- metadata -----------------------------------------------------------------
  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const;
  const Shape& shape() const { return shape_; }
  const Shape& sizes() const { return shape_; }
  const Shape& strides() const { return strides_; }  // in elements
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t dim) const;    // negative dims count from the end
  int64_t stride(int64_t dim) const;
  int64_t numel() const;
  int64_t storage_offset() const { return offset_; }  // in elements
  size_t element_size() const;
  size_t nbytes() const;  // numel() * element_size()
  bool is_contiguous() const;
  const Storage& storage() const { return storage_; }
  bool shares_storage(const Tensor& other) const;
  // Over a meta storage: shape, strides and dtype without data (docs/tensor.md).
  bool is_meta() const { return storage_ != nullptr && storage_->is_meta(); }

  // Address of element [0, 0, ...]. Throws for an undefined or a meta tensor.
  void* data_ptr() const;
  // Typed address; throws TypeError unless T is this tensor's dtype.
  template <typename T>
  T* data() const;

  // The value of a one-element tensor (any shape with numel() == 1).
  Scalar item() const;
  template <typename T>
  T item() const;
  // All elements in row-major order, converted to T.
  template <typename T>
  std::vector<T> to_vector() const;

  // "tensor([[1., 2.], [3., 4.]], dtype=float32)"
  std::string str() const;

  // ---- creation -----------------------------------------------------------------
  static Tensor empty(const Shape& shape, DType dtype = kFloat32, Device device = Device::cpu());
  // Contiguous, over a meta storage for `device` (which need not exist in this
  // process): views, shape ops and dtype rules work on it; reading or writing its
  // elements throws NotImplementedError naming the op.
  static Tensor meta(const Shape& shape, DType dtype = kFloat32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = kFloat32, Device device = Device::cpu());
  static Tensor ones(const Shape& shape, DType dtype = kFloat32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, Scalar value, DType dtype = kFloat32,
                     Device device = Device::cpu());
  // [0, end) or [start, end) by step; dtype int64 unless given.
  static Tensor arange(Scalar end, std::optional<DType> dtype = std::nullopt);
  static Tensor arange(Scalar start, Scalar end, Scalar step = 1,
                       std::optional<DType> dtype = std::nullopt);
  // `steps` evenly spaced values from start to end inclusive.
  static Tensor linspace(Scalar start, Scalar end, int64_t steps, DType dtype = kFloat32);
  // n x m identity (m = n when negative).
  static Tensor eye(int64_t n, int64_t m = -1, DType dtype = kFloat32);
  // Uniform on [0, 1).
  static Tensor rand(const Shape& shape, DType dtype = kFloat32, Generator* gen = nullptr);
  // Standard normal.
  static Tensor randn(const Shape& shape, DType dtype = kFloat32, Generator* gen = nullptr);
  // Uniform integers on [low, high).
  static Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = kInt64,
                        Generator* gen = nullptr);
  // Wraps memory the caller owns (no copy). Contiguous unless strides are given;
  // `deleter` runs when the last tensor using the memory goes away.
  static Tensor from_blob(void* data, const Shape& shape, DType dtype,
                          const Shape& strides = {},
                          StorageImpl::Deleter deleter = nullptr);
  // Copies `values` into a new tensor of `shape` (1-D of values.size() if empty).
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape = {});

  // ---- views (share storage) ----------------------------------------------------
  // One dim may be -1 (inferred). view() needs strides compatible with the new
  // shape and throws otherwise; reshape() copies only when it must.
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;  // transpose of a tensor with <= 2 dims
  Tensor permute(const Dims& dims) const;
  // Elements start, start+step, ... < end along dim; start/end clamp like Python.
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;  // removes dim
  // Size-1 dims broadcast to `shape` with stride 0; -1 keeps a size.
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  // Self when already contiguous, otherwise a contiguous copy.
  Tensor contiguous() const;
  Tensor clone() const;  // always a contiguous copy

  // ---- elementwise ----------------------------------------------------------------
  // Binary ops broadcast and promote dtypes (promote_types). div is true division:
  // integer inputs give float32. In-place forms keep self's dtype and shape: the other
  // operand must broadcast to self and its promoted result must cast to self's dtype.
  Tensor add(const Tensor& other) const;
  Tensor add(Scalar other) const;
  Tensor& add_(const Tensor& other);
  Tensor& add_(Scalar other);
  Tensor sub(const Tensor& other) const;
  Tensor sub(Scalar other) const;
  Tensor& sub_(const Tensor& other);
  Tensor& sub_(Scalar other);
  Tensor mul(const Tensor& other) const;
  Tensor mul(Scalar other) const;
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(Scalar other);
  Tensor div(const Tensor& other) const;
  Tensor div(Scalar other) const;
  Tensor& div_(const Tensor& other);
  Tensor& div_(Scalar other);
  Tensor pow(const Tensor& exponent) const;
  Tensor pow(Scalar exponent) const;
  Tensor& pow_(const Tensor& exponent);
  Tensor& pow_(Scalar exponent);
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;

  // Unary math. The float functions (exp ... gelu) give float32 for integer inputs.
  Tensor neg() const;
  Tensor& neg_();
  Tensor abs() const;
  Tensor& abs_();
  Tensor exp() const;
  Tensor& exp_();
  Tensor log() const;
  Tensor& log_();
  Tensor sqrt() const;
  Tensor& sqrt_();
  Tensor rsqrt() const;
  Tensor& rsqrt_();
  Tensor sin() const;
  Tensor& sin_();
  Tensor cos() const;
  Tensor& cos_();
  Tensor tanh() const;
  Tensor& tanh_();
  Tensor sigmoid() const;
  Tensor& sigmoid_();
  Tensor relu() const;
  Tensor& relu_();
  Tensor gelu() const;  // exact (erf) form
  Tensor& gelu_();
  // Either bound may be absent; min > max gives max everywhere (as torch).
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max) const;
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max);

  // Comparisons give bool tensors.
  Tensor eq(const Tensor& other) const;
  Tensor eq(Scalar other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(Scalar other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(Scalar other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(Scalar other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(Scalar other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(Scalar other) const;

  // A copy converted to dtype (self when it already has it, unless copy).
  Tensor to(DType dtype, bool copy = false) const;
  // A copy on `device` (self when already there, unless copy), contiguous. Host to
  // device and back goes through pinned staging buffers. Like every op on a CUDA
  // tensor it runs on the current stream of the devices involved
  // (tensor/cuda/cuda_stream.h): a copy to a device returns once the source was read,
  // while the copy may still be in flight; a copy to the host returns with the data
  // there, so it waits for the work queued on that stream. Between devices the copy
  // is ordered after the work queued on both devices' streams.
  Tensor to(Device device, bool copy = false) const;
  // to(Device::cuda(index)) and to(Device::cpu()): self when already there.
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor& fill_(Scalar value);
  // Copies src (broadcast to self's shape, converted to self's dtype) into self.
  Tensor& copy_(const Tensor& src);

  // ---- reductions ---------------------------------------------------------------
  // Without dims: over all elements, giving a 0-dim tensor. With dims: over those
  // dims (empty list = all), keeping them as size 1 when keepdim. sum and prod of
  // integers and bool accumulate in int64; mean/var/std/norm need floating input.
  Tensor sum() const;
  Tensor sum(const Dims& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const Dims& dims, bool keepdim = false) const;
  Tensor prod() const;
  Tensor prod(const Dims& dims, bool keepdim = false) const;
  // Values only (torch.amax / amin); argmax/argmin give the int64 positions.
  Tensor max() const;
  Tensor max(const Dims& dims, bool keepdim = false) const;
  Tensor min() const;
  Tensor min(const Dims& dims, bool keepdim = false) const;
  // Index of the first maximum in the flattened tensor, or along dim.
  Tensor argmax() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmin() const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  // p-norm; p may be inf (max |x|) or 0 (count of non-zeros).
  Tensor norm(double p = 2.0) const;
  Tensor norm(double p, const Dims& dims, bool keepdim = false) const;
  // correction = 1 is the unbiased (Bessel) estimate, as torch's default. Another
  // correction over all elements: var(Dims{}, 0). (There is deliberately no
  // var(int64_t): t.var({1}) must mean dim 1, not correction 1.)
  Tensor var() const;
  Tensor var(const Dims& dims, int64_t correction = 1, bool keepdim = false) const;
  Tensor std() const;
  Tensor std(const Dims& dims, int64_t correction = 1, bool keepdim = false) const;
  // Bool results.
  Tensor any() const;
  Tensor any(const Dims& dims, bool keepdim = false) const;
  Tensor all() const;
  Tensor all(const Dims& dims, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // ---- linear algebra -----------------------------------------------------------
  // torch.matmul: 1-D x 1-D dot, 2-D x 2-D mm, batched with broadcast batch dims.
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;   // [n, k] x [k, m]
  Tensor bmm(const Tensor& other) const;  // [b, n, k] x [b, k, m]
  // beta * self + alpha * (mat1 @ mat2); self broadcasts to [n, m].
  Tensor addmm(const Tensor& mat1, const Tensor& mat2, Scalar beta = 1, Scalar alpha = 1) const;
  Tensor dot(const Tensor& other) const;    // 1-D x 1-D -> 0-dim
  Tensor outer(const Tensor& other) const;  // [n] x [m] -> [n, m]

  // ---- indexing, joining, sorting -------------------------------------------------
  // index is an int64 (or int32) tensor.
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  // self[index[i][j]][j] = src[i][j] for dim 0 (and so on); a copy / in place.
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t dim, const Tensor& index, Scalar value) const;
  Tensor& scatter_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor& scatter_(int64_t dim, const Tensor& index, Scalar value);
  // mask is bool and broadcasts to self.
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  Tensor& masked_fill_(const Tensor& mask, Scalar value);
  // Pieces of split_size along dim (the last may be smaller); views.
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  // (values, int64 indices). sort is stable; NaN sorts as the largest value.
  std::pair<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true,
                                 bool sorted = true) const;

  // ---- master-worker mode ---------------------------------------------------------
  // Uploads this tensor to `node` (default: the current node) and returns the
  // remote handle (thd::DistributedTensor::from). Defined by the master layer
  // (libthd_master): only programs that use master-worker mode link it.
  DistributedTensor dist_send(std::optional<int> node = std::nullopt) const;

  // ---- internals ------------------------------------------------------------------
  // Builds a tensor over existing storage; checks that every element it can address
  // lies inside the storage.
  Tensor(Storage storage, DType dtype, Shape shape, Shape strides, int64_t offset);

 private:
  Storage storage_;
  DType dtype_ = kFloat32;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
};

// Free forms.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// cond ? a : b elementwise, everything broadcast; cond must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, Scalar a, Scalar b);
Tensor matmul(const Tensor& a, const Tensor& b);
Shape broadcast_shapes(const Shape& a, const Shape& b);
// The dtype `a op b` computes in (torch.result_type).
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, Scalar b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, Scalar b);
Tensor& operator-=(Tensor& a, Scalar b);
Tensor& operator*=(Tensor& a, Scalar b);
Tensor& operator/=(Tensor& a, Scalar b);

std::ostream& operator<<(std::ostream& os, const Tensor& t);
std::ostream& operator<<(std::ostream& os, const Shape& shape);  // "[2, 3]"
std::string shape_str(const Shape& shape);

// ---- template definitions ---------------------------------------------------------
namespace detail {
[[noreturn]] void throw_dtype_mismatch(const char* op, DType expected, DType got);
// Throws unless t is defined and has data (is not a meta tensor), naming op.
void check_data(const Tensor& t, const char* op, const char* what);
}

template <typename T>
T* Tensor::data() const {
  if (dtype_ != dtype_of_v<T>) detail::throw_dtype_mismatch("data", dtype_of_v<T>, dtype_);
  return static_cast<T*>(data_ptr());
}

template <typename T>
T Tensor::item() const {
  Scalar s = item();
  if constexpr (std::is_same_v<T, bool>) {
    return s.to_bool();
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(s.to_int64());
  } else {
    return static_cast<T>(s.to_double());
  }
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  detail::check_data(*this, "to_vector", "self");
  // A CUDA tensor is read through a host copy (copy_ converts on whichever side moves
  // fewer bytes, and waits for the device's stream).
  Tensor c;
  if (device().is_cpu()) {
    c = to(dtype_of_v<T>).contiguous();
  } else {
    c = empty(shape_, dtype_of_v<T>);
    c.copy_(*this);
  }
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  Shape s = shape.empty() ? Shape{static_cast<int64_t>(values.size())} : shape;
  Tensor t = empty(s, dtype_of_v<T>);
  if (t.numel() != static_cast<int64_t>(values.size())) {
    throw ShapeError("from_vector: " + std::to_string(values.size()) +
                         " values do not fill shape " + shape_str(s),
                     ErrorContext{.op = "from_vector"});
  }
  T* p = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

}  // namespace thd
