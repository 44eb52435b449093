// The CUDA side of one worker stream (docs/cuda.md, "Streams and events on GPU"):
// a created stream runs its ops on CUDA streams of its own (one per GPU it uses,
// from the process's pool, high priority for a high-priority stream); the node's
// default stream runs them on CUDA's legacy default stream, whose implicit
// synchronization with the others is the legacy semantics thd's default stream has.
//
// An op on a GPU tensor returns once its kernels are queued, so what the stream's
// executor has run is not what the GPU has done: an event recorded on a stream that
// queued GPU work completes when that work has (a host function queued behind it),
// and carries a CUDA timing event for elapsed_time. In a build without CUDA every
// stream runs on the CPU alone and all of this is a no-op.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <thd/tensor.h>

namespace thd::worker {

// When a record's GPU work finished, on the worker's steady clock (ns), measured by
// CUDA events (cudaEventElapsedTime against a per-device origin).
class GpuMark {
 public:
  virtual ~GpuMark() = default;
  virtual int64_t time_ns() const = 0;
};

class GpuStreams {
 public:
  // own: a created stream (CUDA streams of its own); else the default stream.
  explicit GpuStreams(bool own);
  ~GpuStreams();
  GpuStreams(const GpuStreams&) = delete;
  GpuStreams& operator=(const GpuStreams&) = delete;

  // Before the first op: the CUDA streams it takes are high priority.
  void set_high_priority(bool high);

  // This stream's CUDA streams are the current ones of this thread while it lives
  // (the op the executor runs now).
  class Use {
   public:
    explicit Use(GpuStreams& streams);
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    void* previous_;  // the thread's StreamSource before (cuda::StreamSource)
  };

  // True once an op asked for a CUDA stream of some device.
  bool used() const;
  // Calls done(mark) once the GPU work queued so far on every device this stream used
  // has finished, on a completion thread of the process (it may call CUDA: the mark's
  // time_ns, a send). At once, on this thread and with a null mark, when the stream
  // queued no GPU work.
  void when_gpu_done(std::function<void(std::shared_ptr<const GpuMark>)> done);
  // True when the GPU work queued so far has finished (Stream::query).
  bool idle() const;
  // Waits for the GPU work queued so far (thd::synchronize); raises an asynchronous
  // CUDA error that work hit.
  void synchronize();
  // Marks `tensor`'s storage (a CUDA tensor's) as used by every CUDA stream that a
  // worker stream of this process holds on its device, so a free does not hand its
  // memory out while they may still read it. Takes no lock of the StreamSet (a free
  // may run on an executor that is being reaped).
  static void record_uses(const Tensor& tensor);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace thd::worker
