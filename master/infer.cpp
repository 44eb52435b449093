#include "master/infer.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <unordered_map>

#include "master/block_pool.h"

#include "tensor/check.h"
#include "tensor/shape_util.h"

namespace thd::master {

namespace {

// The storage of a mirror: no bytes, `nbytes` on `device`; from the pool (one per
// op's result).
Storage meta_storage(size_t nbytes, Device device) {
  return std::allocate_shared<StorageImpl>(PoolAllocator<StorageImpl>{}, StorageImpl::Meta{}, nbytes, device);
}

}  // namespace

Tensor mirror(Shape&& shape, DType dtype, Device device, const char* op) {
  const auto es = static_cast<int64_t>(element_size(dtype));
  const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  int64_t numel = 1;
  for (int64_t d : shape) {
    THD_CHECK(d >= 0, ValueError, op, "negative size {} in shape {}", d, shape_str(shape));
    if (!empty && numel > INT64_MAX / es / d) {
      THD_THROW(ValueError, op, "a tensor of shape {} and dtype {} is too large: it needs more than 2^63 - 1 bytes",
                shape_str(shape), dtype);
    }
    numel = empty ? 0 : numel * d;
  }
  Shape strides = detail::contiguous_strides(shape);
  return Tensor(meta_storage(static_cast<size_t>(numel * es), device), dtype, std::move(shape), std::move(strides), 0);
}

Tensor mirror(const Shape& shape, DType dtype, Device device, const char* op) {
  return mirror(Shape(shape), dtype, device, op);
}

Tensor on_device(Tensor meta, Device device) {
  if (meta.device() == device) return meta;  // the hot path: moved, not copied
  return Tensor(meta_storage(meta.storage()->nbytes(), device), meta.dtype(), meta.shape(), meta.strides(),
                meta.storage_offset());
}

Handle::Handle(std::weak_ptr<Session> session, uint64_t id, int node, Device device, Tensor meta)
    : session(std::move(session)),
      id(id),
      node(node),
      device(device),
      dtype_(meta.dtype()),
      rank_(meta.shape().size()),
      meta_(on_device(std::move(meta), device)) {
  if (rank_ <= FreshMeta::kMaxInlineDims) std::copy(meta_.shape().begin(), meta_.shape().end(), dims_.begin());
  meta_made_.store(true, std::memory_order_release);
}

Handle::Handle(std::weak_ptr<Session> session, uint64_t id, int node, Device device, const FreshMeta& fresh)
    : session(std::move(session)), id(id), node(node), device(device), dtype_(fresh.dtype), rank_(fresh.rank),
      dims_(fresh.dims) {}

const Tensor& Handle::make_meta() const {
  // Rare (a fresh result's first view, fetch or non-elementwise op): one lock for all.
  static std::mutex mu;
  std::lock_guard lock(mu);
  if (!meta_made_.load(std::memory_order_relaxed)) {
    meta_ = mirror(Shape(dims_.begin(), dims_.begin() + static_cast<std::ptrdiff_t>(rank_)), dtype_, device);
    meta_made_.store(true, std::memory_order_release);
  }
  return meta_;
}

Tensor probe_of(const Tensor& meta) {
  // Sizes of 0 stay 0, so ops that refuse empty input (max() of nothing) refuse
  // the probe too.
  Shape shape = meta.shape();
  for (int64_t& d : shape) d = std::min<int64_t>(d, 1);
  return Tensor::ones(shape, meta.dtype());
}

DType probe_dtype(const std::function<Tensor()>& op) { return op().dtype(); }

namespace {

// Per thread: no lock on the hot path.
std::unordered_map<uint64_t, DType>& dtype_cache() {
  thread_local std::unordered_map<uint64_t, DType> cache;
  return cache;
}

}  // namespace

std::optional<DType> cached_dtype(uint64_t key) {
  const auto& cache = dtype_cache();
  const auto it = cache.find(key);
  if (it == cache.end()) return std::nullopt;
  return it->second;
}

void remember_dtype(uint64_t key, DType dtype) { dtype_cache().emplace(key, dtype); }

int64_t wrap_dim(const char* op, int64_t dim, int64_t rank) {
  const int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r) {
    THD_THROW(IndexError, op, "dimension {} is out of range for a tensor of {} dims (expected -{}..{})", dim, rank, r,
              r - 1);
  }
  return dim < 0 ? dim + r : dim;
}

Shape broadcast_for(const char* op, const Shape& a, const Shape& b) {
  if (a == b) return a;
  try {
    return broadcast_shapes(a, b);
  } catch (const ShapeError& e) {
    THD_THROW(ShapeError, op, "shapes {} and {} cannot be broadcast together", shape_str(a), shape_str(b));
  }
}

void check_writable(const char* op, const Tensor& meta) {
  for (int64_t d = 0; d < meta.dim(); ++d) {
    if (meta.shape()[d] > 1 && meta.strides()[d] == 0) {
      THD_THROW(ValueError, op,
                "unsupported operation: more than one element of the written-to tensor (shape {}, strides {}) "
                "refers to a single memory location; clone() it before writing to it",
                shape_str(meta.shape()), shape_str(meta.strides()));
    }
  }
}

void check_broadcasts_to(const char* op, const Shape& other, const Shape& self) {
  if (other == self) return;
  Shape out = broadcast_for(op, self, other);
  if (out != self) {
    THD_THROW(ShapeError, op, "in-place: operand of shape {} does not broadcast to self's shape {}",
              shape_str(other), shape_str(self));
  }
}

Shape reduced_shape(const char* op, const Shape& in, const Dims& dims, bool keepdim) {
  const auto rank = static_cast<int64_t>(in.size());
  std::vector<bool> reduce(in.size(), dims.empty());
  std::vector<bool> named(in.size(), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(op, d, rank);
    if (rank == 0) continue;
    if (named[w]) THD_THROW(IndexError, op, "dim {} appears more than once in the list of dims", w);
    named[w] = reduce[w] = true;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!reduce[i]) out.push_back(in[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

Shape matmul_shape(const char* op, const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) {
    THD_THROW(ValueError, op, "both arguments need at least 1 dim, got shapes {} and {}", shape_str(a), shape_str(b));
  }
  auto mismatch = [&] {
    THD_THROW(ShapeError, op, "shapes {} and {} cannot be multiplied ({} vs {})", shape_str(a), shape_str(b),
              a.back(), b.size() == 1 ? b[0] : b[b.size() - 2]);
  };
  if (a.size() == 1 && b.size() == 1) {
    if (a[0] != b[0]) mismatch();
    return {};
  }
  const int64_t k_b = b.size() == 1 ? b[0] : b[b.size() - 2];
  if (a.back() != k_b) mismatch();
  Shape batch_a(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
  Shape batch_b(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
  Shape out = broadcast_for(op, batch_a, batch_b);
  if (a.size() >= 2) out.push_back(a[a.size() - 2]);
  if (b.size() >= 2) out.push_back(b.back());
  return out;
}

Shape cat_shape(const std::vector<Shape>& shapes, int64_t dim) {
  if (shapes.empty()) THD_THROW(ValueError, "cat", "expected a non-empty list of tensors");
  const Shape& first = shapes[0];
  if (first.empty()) THD_THROW(ValueError, "cat", "zero-dimensional tensors cannot be concatenated");
  const int64_t d = wrap_dim("cat", dim, static_cast<int64_t>(first.size()));
  Shape out = first;
  out[d] = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    if (s.size() != first.size()) {
      THD_THROW(ShapeError, "cat", "tensor {} has {} dims, tensor 0 has {}", i, s.size(), first.size());
    }
    for (size_t j = 0; j < s.size(); ++j) {
      if (static_cast<int64_t>(j) != d && s[j] != first[j]) {
        THD_THROW(ShapeError, "cat", "sizes must match except in dim {}: tensor {} has shape {}, tensor 0 has {}", d,
                  i, shape_str(s), shape_str(first));
      }
    }
    out[d] += s[d];
  }
  return out;
}

Shape stack_shape(const std::vector<Shape>& shapes, int64_t dim) {
  if (shapes.empty()) THD_THROW(ValueError, "stack", "expected a non-empty list of tensors");
  for (size_t i = 1; i < shapes.size(); ++i) {
    if (shapes[i] != shapes[0]) {
      THD_THROW(ShapeError, "stack", "every tensor needs the same shape: tensor {} has {}, tensor 0 has {}", i,
                shape_str(shapes[i]), shape_str(shapes[0]));
    }
  }
  const int64_t d = wrap_dim("stack", dim, static_cast<int64_t>(shapes[0].size()) + 1);
  Shape out = shapes[0];
  out.insert(out.begin() + d, static_cast<int64_t>(shapes.size()));
  return out;
}

}  // namespace thd::master
