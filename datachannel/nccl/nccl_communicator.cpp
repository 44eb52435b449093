#include "datachannel/nccl/nccl_communicator.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include <thd/error.h>

#include "datachannel/check.h"
#include "datachannel/nccl/nccl_util.h"
#include "tensor/cuda/cuda_stream.h"

namespace thd::detail::nccl {

namespace {

// How long a healthy communicator may take to finalize before it is aborted
// instead: finalizing only flushes what this rank issued, which has finished by
// the time its owner lets it go.
constexpr std::chrono::seconds kFinalizeBound{5};
constexpr std::chrono::microseconds kFirstNap{20};
constexpr std::chrono::microseconds kLongestNap{1000};

// Makes `device` current for a teardown step that must not throw.
class QuietDeviceGuard {
 public:
  explicit QuietDeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) (void)cudaSetDevice(device);
  }
  ~QuietDeviceGuard() {
    int now = -1;
    if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
  }
  QuietDeviceGuard(const QuietDeviceGuard&) = delete;
  QuietDeviceGuard& operator=(const QuietDeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace

Communicator::Communicator(const ncclUniqueId& id, int size, int rank, int device, net::Deadline deadline,
                           const CallSite& where, std::string name)
    : size_(size), rank_(rank), device_(device), name_(std::move(name)) {
  cuda::DeviceGuard on_device(device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = name_.c_str();
  ncclComm_t comm = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  std::lock_guard lock(mu_);
  comm_ = comm;
  std::exception_ptr error;
  if (started != ncclSuccess && started != ncclInProgress) {
    error = make_error(started, "ncclCommInitRankConfig", where, __FILE__, __LINE__);
  } else if (const ncclResult_t state = poll_until_done(deadline); state == ncclInProgress) {
    error = error_at<TimeoutError>(where, __FILE__, __LINE__,
                                   "NCCL did not set up communicator '{}' ({} ranks, this one rank {} on cuda:{}) "
                                   "before the deadline: a member reached the store but never finished joining "
                                   "NCCL (it died or is stuck, or NCCL cannot connect the ranks: NCCL_DEBUG=INFO "
                                   "says why); the communicator was aborted",
                                   name_, size, rank, device);
  } else if (state != ncclSuccess) {
    error = make_error(state, "ncclCommInitRankConfig", where, __FILE__, __LINE__);
  }
  if (!error) return;
  abort_locked(error);
  std::rethrow_exception(error);
}

Communicator::~Communicator() {
  std::lock_guard lock(mu_);
  if (comm_ == nullptr) return;
  QuietDeviceGuard on_device(device_);
  const ncclResult_t started = ncclCommFinalize(comm_);
  if (started == ncclSuccess || started == ncclInProgress) {
    if (poll_until_done(net::Clock::now() + kFinalizeBound) == ncclSuccess) {
      (void)ncclCommDestroy(comm_);
      comm_ = nullptr;
      return;
    }
  }
  abort_locked(nullptr);
}

ncclComm_t Communicator::handle(const CallSite& where) const {
  if (comm_ != nullptr) return comm_;
  THD_THROW_AT(ValueError, where.op, where.rank, where.peer,
               "the NCCL communicator '{}' was aborted after an earlier failure ({}); device operations on this "
               "group cannot go on: make a new group (DataChannel::new_group)",
               name_, what_of(broken_));
}

void Communicator::finish(ncclResult_t result, net::Deadline deadline, const CallSite& where) {
  if (result == ncclSuccess) return;
  const ncclResult_t state = poll_until_done(deadline);
  if (state == ncclSuccess) return;
  std::exception_ptr error =
      state == ncclInProgress
          ? error_at<TimeoutError>(where, __FILE__, __LINE__,
                                   "NCCL did not finish enqueueing the operation before its deadline (it was "
                                   "connecting the ranks of communicator '{}'): a member is not taking part or is "
                                   "stuck; the communicator was aborted",
                                   name_)
          : make_error(state, "ncclCommGetAsyncError", where, __FILE__, __LINE__);
  abort_locked(error);
  std::rethrow_exception(error);
}

std::exception_ptr Communicator::poll_error(const CallSite& where) {
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock) return nullptr;
  if (comm_ == nullptr) return broken_;
  ncclResult_t state = ncclSuccess;
  const ncclResult_t asked = ncclCommGetAsyncError(comm_, &state);
  if (asked != ncclSuccess) return make_error(asked, "ncclCommGetAsyncError", where, __FILE__, __LINE__);
  if (state == ncclSuccess || state == ncclInProgress) return nullptr;
  return make_error(state, "ncclCommGetAsyncError (an asynchronous error)", where, __FILE__, __LINE__);
}

void Communicator::abort(std::exception_ptr why) noexcept {
  std::lock_guard lock(mu_);
  abort_locked(std::move(why));
}

std::exception_ptr Communicator::broken() const {
  std::lock_guard lock(mu_);
  return broken_;
}

void Communicator::abort_locked(std::exception_ptr why) noexcept {
  if (!broken_) broken_ = std::move(why);
  if (comm_ == nullptr) return;
  QuietDeviceGuard on_device(device_);
  (void)ncclCommAbort(comm_);
  comm_ = nullptr;
}

ncclResult_t Communicator::poll_until_done(net::Deadline deadline) {
  auto nap = kFirstNap;
  for (;;) {
    ncclResult_t state = ncclInProgress;
    const ncclResult_t asked = ncclCommGetAsyncError(comm_, &state);
    if (asked != ncclSuccess) return asked;
    if (state != ncclInProgress) return state;
    if (net::Clock::now() >= deadline) return ncclInProgress;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, kLongestNap);
  }
}

}  // namespace thd::detail::nccl
