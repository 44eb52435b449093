// Owners of libfabric objects. Every fid the libfabric pipe opens (fabric, domain,
// completion queue, address vector, endpoint, memory region) lives in a Fid<T>, so
// an exception on any set-up path closes what was opened before it.
#pragma once

#include <memory>
#include <utility>

#include <rdma/fabric.h>

namespace thd::detail::libfabric {

template <typename T>
class Fid {
 public:
  Fid() = default;
  ~Fid() { reset(); }

  Fid(Fid&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  Fid& operator=(Fid&& other) noexcept {
    if (this != &other) {
      reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
    }
    return *this;
  }
  Fid(const Fid&) = delete;
  Fid& operator=(const Fid&) = delete;

  T* get() const noexcept { return ptr_; }
  T* operator->() const noexcept { return ptr_; }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }
  fid* as_fid() const noexcept { return &ptr_->fid; }

  // Where an fi_* open call writes the new object: fi_domain(fabric, info, d.out(), ctx).
  T** out() noexcept {
    reset();
    return &ptr_;
  }

  // fi_close's result is not actionable while tearing down: the object is gone
  // either way, and the pipe has already stopped using it.
  void reset() noexcept {
    if (ptr_ != nullptr) (void)fi_close(&ptr_->fid);
    ptr_ = nullptr;
  }

 private:
  T* ptr_ = nullptr;
};

struct InfoDeleter {
  void operator()(fi_info* info) const noexcept { fi_freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

}  // namespace thd::detail::libfabric
