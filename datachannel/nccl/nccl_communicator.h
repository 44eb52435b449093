// One NCCL communicator, owned. It is made nonblocking (ncclConfig_t::blocking =
// 0) so that nothing NCCL does can hang a thd call: set-up and every enqueue are
// polled with ncclCommGetAsyncError against a deadline, and a communicator that
// misses it, or reports an error, is aborted (ncclCommAbort) and stays broken.
#pragma once

#include <nccl.h>

#include <exception>
#include <mutex>
#include <string>

#include "datachannel/nccl/nccl_error.h"
#include "datachannel/net/socket.h"

namespace thd::detail::nccl {

class Communicator {
 public:
  // Rank `rank` of `size` on CUDA device `device`, meeting the others through `id`.
  // Returns once NCCL has set it up. Past `deadline` (a member that never
  // joined): aborts and throws TimeoutError; an NCCL error: aborts and throws it.
  // `name` shows in NCCL's own logs.
  Communicator(const ncclUniqueId& id, int size, int rank, int device, net::Deadline deadline, const CallSite& where,
               std::string name);
  // A healthy communicator is finalized (ncclCommFinalize, polled for a few
  // seconds) and destroyed; one that is broken, or does not finalize in time, is
  // aborted. Never throws, never blocks for long.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int size() const noexcept { return size_; }
  int rank() const noexcept { return rank_; }
  int device() const noexcept { return device_; }
  const std::string& name() const noexcept { return name_; }

  // Held while enqueueing on the communicator: NCCL calls on one communicator
  // must not overlap, and an abort must not overlap them either.
  std::unique_lock<std::mutex> lock() { return std::unique_lock(mu_); }
  // Under lock(): the handle to enqueue on; throws the reason when it is broken.
  ncclComm_t handle(const CallSite& where) const;
  // Under lock(), after an NCCL call on it returned `result`: when that is
  // ncclInProgress, polls until NCCL has finished the call (it may be connecting
  // to peers). Past `deadline` or on an error: aborts and throws.
  void finish(ncclResult_t result, net::Deadline deadline, const CallSite& where);

  // An asynchronous error NCCL reports (a peer failed, a CUDA error in its
  // kernels), nullptr while healthy or while another thread holds the lock.
  std::exception_ptr poll_error(const CallSite& where);

  // Aborts it (ncclCommAbort): its kernels stop and every later use throws a
  // ValueError naming `why`. The first reason stays; idempotent. Never throws.
  void abort(std::exception_ptr why) noexcept;
  // The reason it was aborted, nullptr while healthy.
  std::exception_ptr broken() const;

 private:
  void abort_locked(std::exception_ptr why) noexcept;
  // Polls until NCCL stops answering ncclInProgress; the final result, or
  // ncclInProgress when `deadline` passed first.
  ncclResult_t poll_until_done(net::Deadline deadline);

  const int size_;
  const int rank_;
  const int device_;
  const std::string name_;
  mutable std::mutex mu_;
  ncclComm_t comm_ = nullptr;  // null once aborted or destroyed
  std::exception_ptr broken_;
};

}  // namespace thd::detail::nccl
