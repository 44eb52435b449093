#include "worker/gpu_streams.h"

#include <thd/config.h>

#if THD_WITH_CUDA

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <thread>
#include <utility>
#include <vector>
#include <memory>

#include "tensor/cuda/caching_allocator.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_stream.h"
#include "tensor/cuda/event_pool.h"

namespace thd::worker {
namespace {

constexpr int kMaxDevices = 64;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A timing event recorded behind a record's GPU work on one device.
class TimedMark final : public GpuMark, public std::enable_shared_from_this<TimedMark> {
 public:
  TimedMark(int device, cudaEvent_t event) : device_(device), event_(event) {}
  // Back to the pool, which makes no CUDA call: this may run in a host function.
  ~TimedMark() override { cuda::detail::EventPool::instance().release(device_, event_, /*timing=*/true); }
  int64_t time_ns() const override;
  int device() const { return device_; }
  cudaEvent_t event() const { return event_; }

 private:
  int device_;
  cudaEvent_t event_;
};

// Per device: a completed timing event whose time on the steady clock is known, the
// origin GPU times are measured from. cudaEventElapsedTime gives float milliseconds,
// exact to about a microsecond over 10 s: a mark further than 5 s from the origin
// becomes the origin (its own time measured from the old one first).
struct Origin {
  std::mutex mu;
  std::shared_ptr<const TimedMark> mark;
  int64_t ns = 0;
};

Origin& origin_of(int device) {
  static auto* origins = new std::array<Origin, kMaxDevices>;  // never destroyed, as the event pool
  return (*origins)[static_cast<size_t>(device)];
}

int64_t TimedMark::time_ns() const {
  Origin& o = origin_of(device_);
  std::lock_guard lock(o.mu);
  cuda::DeviceGuard on(device_);
  if (!o.mark) {
    // The first origin: recorded on the legacy stream and waited for, then read off
    // the host clock (a few microseconds off, once per device and process).
    cudaEvent_t e = cuda::detail::EventPool::instance().acquire(device_, /*timing=*/true);
    THD_CUDA_CHECK(cudaEventRecord(e, nullptr), "Event::elapsed_time");
    THD_CUDA_CHECK(cudaEventSynchronize(e), "Event::elapsed_time");
    o.ns = now_ns();
    o.mark = std::make_shared<const TimedMark>(device_, e);
  }
  THD_CUDA_CHECK(cudaEventSynchronize(event_), "Event::elapsed_time");
  float ms = 0;
  THD_CUDA_CHECK(cudaEventElapsedTime(&ms, o.mark->event(), event_), "Event::elapsed_time");
  const int64_t t = o.ns + std::llround(static_cast<double>(ms) * 1e6);
  if (std::abs(ms) > 5000.0f) {
    o.mark = shared_from_this();
    o.ns = t;
  }
  return t;
}

// The CUDA streams worker streams hold now, for frees (GpuStreams::record_uses).
struct HeldStreams {
  std::mutex mu;
  std::vector<std::pair<int, cudaStream_t>> list;
};

HeldStreams& held_streams() {
  static auto* held = new HeldStreams;  // never destroyed, as the stream pool
  return *held;
}

}  // namespace

// One slot per device: the CUDA stream this stream runs there (null: the legacy
// stream), and whether an op asked for it. Written by the thread that runs the
// stream's ops, read by others (frees, synchronize) once that work has run.
class GpuStreams::Impl final : public cuda::StreamSource {
 public:
  explicit Impl(bool own) : own_(own) {}

  void set_high_priority(bool high) { high_priority_ = high; }

  // A destroyed thd stream's CUDA streams go back to the pool once their work is
  // done: the memory that work used is then free to go anywhere, with no record of
  // the stream left to order it (frees mark only live streams' uses).
  ~Impl() override {
    for (int d = 0; d < kMaxDevices; ++d) {
      if (cudaStream_t s = slots_[static_cast<size_t>(d)].stream.load()) {
        // An error here belongs to the ops, which reported it or left it to the next
        // synchronize; the stream still goes back. Frees record on it until its work
        // is done.
        (void)cudaStreamSynchronize(s);
        (void)cudaGetLastError();
        {
          HeldStreams& held = held_streams();
          std::lock_guard lock(held.mu);
          std::erase(held.list, std::make_pair(d, s));
        }
        cuda::release_pooled_stream(d, s, high_priority_);
      }
    }
  }

  cudaStream_t stream_for(int device) override {
    if (device < 0 || device >= kMaxDevices) return nullptr;
    Slot& slot = slots_[static_cast<size_t>(device)];
    if (!slot.used.load(std::memory_order_acquire)) {
      if (own_) {
        cudaStream_t s = cuda::acquire_pooled_stream(device, high_priority_);
        {
          HeldStreams& held = held_streams();
          std::lock_guard lock(held.mu);
          held.list.emplace_back(device, s);
        }
        slot.stream.store(s);
      }
      slot.used.store(true, std::memory_order_release);
      any_used_.store(true, std::memory_order_release);
    }
    return slot.stream.load(std::memory_order_relaxed);
  }

  template <typename Fn>
  void for_each_used(Fn&& fn) const {
    if (!any_used_.load(std::memory_order_acquire)) return;
    for (int d = 0; d < kMaxDevices; ++d) {
      const Slot& slot = slots_[static_cast<size_t>(d)];
      if (slot.used.load(std::memory_order_acquire)) fn(d, slot.stream.load());
    }
  }

  bool used() const { return any_used_.load(std::memory_order_acquire); }

 private:
  struct Slot {
    std::atomic<bool> used{false};
    std::atomic<cudaStream_t> stream{nullptr};
  };
  const bool own_;
  bool high_priority_ = false;  // set before the first op, read by the thread that runs them
  std::array<Slot, kMaxDevices> slots_;
  std::atomic<bool> any_used_{false};
};

GpuStreams::GpuStreams(bool own) : impl_(std::make_unique<Impl>(own)) {}

void GpuStreams::set_high_priority(bool high) { impl_->set_high_priority(high); }

GpuStreams::~GpuStreams() = default;

GpuStreams::Use::Use(GpuStreams& streams) : previous_(cuda::exchange_stream_source(streams.impl_.get())) {}

GpuStreams::Use::~Use() { cuda::exchange_stream_source(static_cast<cuda::StreamSource*>(previous_)); }

bool GpuStreams::used() const { return impl_->used(); }

namespace {

// What the host functions of one when_gpu_done share: the last to run calls done.
struct Pending {
  std::atomic<int> left{0};
  std::shared_ptr<const GpuMark> mark;
  std::function<void(std::shared_ptr<const GpuMark>)> done;
};

// Runs what host functions hand it on a thread of its own: a host function may not
// call CUDA, and should not block the stream behind it, while completing a record
// reads its GPU time and may send over the DataChannel. One per process, never
// stopped (a detached thread parked on its condition variable at exit).
class CompletionThread {
 public:
  static CompletionThread& instance() {
    static auto* t = new CompletionThread;
    return *t;
  }
  void post(std::function<void()> fn) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(fn));
    }
    cv_.notify_all();
  }
  // Waits until everything posted so far has run (not from this thread).
  void drain() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return queue_.empty() && !running_; });
  }

 private:
  CompletionThread() {
    std::thread([this] {
      for (;;) {
        std::function<void()> fn;
        {
          std::unique_lock lock(mu_);
          running_ = false;
          cv_.notify_all();
          cv_.wait(lock, [this] { return !queue_.empty(); });
          fn = std::move(queue_.front());
          queue_.pop_front();
          running_ = true;
        }
        fn();
      }
    }).detach();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool running_ = false;
};

void finish(const std::shared_ptr<Pending>& p) {
  if (p->left.fetch_sub(1) == 1) p->done(p->mark);
}

void CUDART_CB on_gpu_done(void* data) {
  auto* held = static_cast<std::shared_ptr<Pending>*>(data);
  std::shared_ptr<Pending> p = std::move(*held);
  delete held;
  CompletionThread::instance().post([p = std::move(p)] { finish(p); });
}

}  // namespace

void GpuStreams::when_gpu_done(std::function<void(std::shared_ptr<const GpuMark>)> done) {
  std::vector<std::pair<int, cudaStream_t>> used;
  impl_->for_each_used([&](int d, cudaStream_t s) { used.emplace_back(d, s); });
  if (used.empty()) {
    done(nullptr);
    return;
  }
  auto pending = std::make_shared<Pending>();
  pending->left = static_cast<int>(used.size());
  pending->done = std::move(done);
  // Timed on the first device the stream used (elapsed_time compares two records
  // of one device, as CUDA's does).
  {
    const auto [d, s] = used.front();
    cuda::DeviceGuard on(d);
    cudaEvent_t e = cuda::detail::EventPool::instance().acquire(d, /*timing=*/true);
    auto mark = std::make_shared<const TimedMark>(d, e);
    THD_CUDA_CHECK(cudaEventRecord(e, s), "Event::record");
    pending->mark = std::move(mark);
  }
  for (const auto& [d, s] : used) {
    cuda::DeviceGuard on(d);
    auto* held = new std::shared_ptr<Pending>(pending);
    const cudaError_t err = cudaLaunchHostFunc(s, on_gpu_done, held);
    if (err != cudaSuccess) {
      delete held;
      (void)cudaGetLastError();
      // The record cannot be told when the GPU is done: wait for it here instead.
      THD_CUDA_CHECK(cudaStreamSynchronize(s), "Event::record");
      finish(pending);
    }
  }
}

bool GpuStreams::idle() const {
  bool idle = true;
  impl_->for_each_used([&](int d, cudaStream_t s) {
    if (!idle) return;
    cuda::DeviceGuard on(d);
    const cudaError_t err = cudaStreamQuery(s);
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      idle = false;
      return;
    }
    THD_CUDA_CHECK(err, "Stream::query");
  });
  return idle;
}

void GpuStreams::synchronize() {
  if (!impl_->used()) return;
  impl_->for_each_used([](int d, cudaStream_t s) {
    cuda::DeviceGuard on(d);
    THD_CUDA_CHECK(cudaStreamSynchronize(s), "synchronize");
  });
  // The records those streams completed have been told.
  CompletionThread::instance().drain();
}

void GpuStreams::record_uses(const Tensor& tensor) {
  // The legacy default stream needs no record: a blocking stream's later work waits
  // for it anyway.
  const int device = tensor.device().index();
  HeldStreams& held = held_streams();
  std::lock_guard lock(held.mu);
  for (const auto& [d, s] : held.list) {
    if (d == device) cuda::record_stream(tensor.storage(), s);
  }
}

}  // namespace thd::worker

#else  // without CUDA: every stream runs on the CPU alone

namespace thd::worker {

class GpuStreams::Impl {};

GpuStreams::GpuStreams(bool /*own*/) {}
void GpuStreams::set_high_priority(bool /*high*/) {}
GpuStreams::~GpuStreams() = default;
GpuStreams::Use::Use(GpuStreams& /*streams*/) : previous_(nullptr) {}
GpuStreams::Use::~Use() { (void)previous_; }
bool GpuStreams::used() const { return false; }
void GpuStreams::when_gpu_done(std::function<void(std::shared_ptr<const GpuMark>)> done) { done(nullptr); }
bool GpuStreams::idle() const { return true; }
void GpuStreams::synchronize() {}
void GpuStreams::record_uses(const Tensor& /*tensor*/) {}

}  // namespace thd::worker

#endif
