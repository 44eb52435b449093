// The master's side of one remote tensor: its id, where it lives, and a metadata
// mirror (dtype, shape, strides, offset, device) kept as a thd::Tensor over a meta
// storage of the remote tensor's size and device (no bytes: docs/tensor.md), so
// views are computed by the tensor library itself, exactly as the worker will
// compute them, and its device checks see the remote device. An op that would
// read or write the mirror's elements throws NotImplementedError naming the op.
// The result of an elementwise op keeps its dtype and shape inline and makes its
// mirror when first asked (a view, a fetch, an op inferred through the mirror):
// a result that only feeds further elementwise ops, or is dropped, never costs one.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include <thd/device.h>
#include <thd/tensor.h>

namespace thd::master {

class Session;

// A new contiguous tensor's metadata, without a mirror yet: what an elementwise
// op's result needs (master/infer.h, infer_fresh).
struct FreshMeta {
  static constexpr size_t kMaxInlineDims = 6;
  DType dtype;
  uint8_t rank;
  std::array<int64_t, kMaxInlineDims> dims;
};

struct Handle {
  // `meta` is moved to `device` when it is not there already.
  Handle(std::weak_ptr<Session> session, uint64_t id, int node, Device device, Tensor meta);
  // A new contiguous tensor on `device`: its mirror is made when first asked for
  // (most results are only ever operands of further elementwise ops, which need
  // their shape and dtype alone).
  Handle(std::weak_ptr<Session> session, uint64_t id, int node, Device device, const FreshMeta& fresh);
  // The last reference queues a lazy Free on the node (nothing when the session
  // has ended: the worker freed everything then).
  ~Handle();
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  // The metadata mirror (meta().device() == device), made on first use for a
  // fresh tensor; safe from any thread.
  const Tensor& meta() const {
    return meta_made_.load(std::memory_order_acquire) ? meta_ : make_meta();
  }
  DType dtype() const { return dtype_; }
  std::span<const int64_t> shape() const {
    if (rank_ <= FreshMeta::kMaxInlineDims) return {dims_.data(), rank_};
    return meta_.shape();  // made at construction
  }

  std::weak_ptr<Session> session;
  const uint64_t id;
  const int node;
  const Device device;
  // Never made on its node (created in a graph capture that was discarded, or by a
  // graph reset before its first replay): its release sends no Free.
  std::atomic<bool> never_made{false};

 private:
  const Tensor& make_meta() const;

  const DType dtype_;
  size_t rank_;  // the shape is in dims_ when rank_ <= kMaxInlineDims
  std::array<int64_t, FreshMeta::kMaxInlineDims> dims_{};
  mutable std::atomic<bool> meta_made_{false};
  mutable Tensor meta_;  // written once, before meta_made_ is set
};

// A contiguous metadata mirror of `shape` and `dtype` on `device` (views of it are
// mirrors too). ValueError naming `op` for a negative size, or a tensor whose bytes
// would not fit in int64 (no node could hold it).
Tensor mirror(const Shape& shape, DType dtype, Device device = Device::cpu(), const char* op = "tensor");
Tensor mirror(Shape&& shape, DType dtype, Device device = Device::cpu(), const char* op = "tensor");
// `meta` (a mirror, or a view of one) with the same metadata on `device`.
Tensor on_device(Tensor meta, Device device);

}  // namespace thd::master
