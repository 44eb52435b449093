#include "tensor/cuda/transfer.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "tensor/cuda/copy_kernel.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_stream.h"
#include "tensor/cuda/event_pool.h"
#include "tensor/cuda/pinned_allocator.h"
#include "tensor/parallel.h"

namespace thd::cuda {
namespace {

// Bytes per staging buffer, and buffers in flight. Measured on an H100 (PCIe 5,
// 16 host threads) for 1 GiB: 8 MiB chunks reach ~30 GB/s each way, 16 MiB chunks
// ~50 GB/s, against 55 GB/s for cudaMemcpy from pinned memory (and 9 GB/s from
// pageable memory): the fixed costs per chunk (waking the host threads, a copy call,
// an event) need the larger chunks to hide behind. A third buffer did not help.
constexpr size_t kChunk = size_t{16} << 20;
constexpr size_t kStagingBuffers = 2;

// memcpy by several host threads for large chunks: one core's memcpy falls well
// short of what a PCIe 5 or NVLink-C2C link moves. (Non-temporal stores measured
// slower than glibc's memcpy here.)
void host_copy(void* dst, const void* src, size_t n) {
  constexpr int64_t kBytesPerTask = int64_t{256} << 10;
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  thd::detail::parallel_for(0, static_cast<int64_t>(n), kBytesPerTask, [&](int64_t b, int64_t e) {
    std::memcpy(d + b, s + b, static_cast<size_t>(e - b));
  });
}

// t with every broadcast dim (stride 0, size > 1) cut to size 1: just the elements it
// holds, which is all that needs to cross a link; the far side expands it again.
Tensor strip_broadcast(const Tensor& t) {
  Tensor r = t;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) == 0 && t.size(d) > 1) r = r.narrow(d, 0, 1);
  }
  return r;
}

// The dtype to move across a link: the smaller of the two, so the conversion runs on
// whichever side then has fewer bytes to move. On a tie, `tie`.
DType transfer_dtype(DType a, DType b, DType tie) {
  const size_t ea = element_size(a), eb = element_size(b);
  if (ea == eb) return tie;
  return ea < eb ? a : b;
}

bool is_plain_target(const Tensor& dst, const Tensor& data) {
  return dst.dtype() == data.dtype() && dst.shape() == data.shape() && dst.is_contiguous();
}

// Both on one device.
void copy_within_device(const Tensor& dst, const Tensor& src) {
  const int device = dst.device().index();
  DeviceGuard guard(device);
  if (src.dtype() == dst.dtype() && src.shape() == dst.shape() && src.is_contiguous() &&
      dst.is_contiguous()) {
    THD_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(),
                                   cudaMemcpyDeviceToDevice, current_stream(device)),
                   "copy_");
    return;
  }
  copy_on_device(dst, src.expand(dst.shape()), "copy_");
}

// src as contiguous `dtype` on its device (src itself when it already is).
Tensor dense_on_device(const Tensor& src, DType dtype) {
  if (src.dtype() == dtype && src.is_contiguous()) return src;
  Tensor out = Tensor::empty(src.shape(), dtype, src.device());
  copy_within_device(out, src);
  return out;
}

void copy_to_device(const Tensor& dst, const Tensor& src) {
  const Tensor s = strip_broadcast(src);
  // Converting on the device is cheap; on the host it is a pass over the data.
  const DType moved = transfer_dtype(s.dtype(), dst.dtype(), s.dtype());
  const Tensor host = s.to(moved).contiguous();
  const int device = dst.device().index();
  const cudaStream_t stream = current_stream(device);
  if (is_plain_target(dst, host)) {
    copy_host_to_device(dst.data_ptr(), host.data_ptr(), dst.nbytes(), device, stream);
    return;
  }
  Tensor staged = Tensor::empty(host.shape(), moved, dst.device());
  copy_host_to_device(staged.data_ptr(), host.data_ptr(), staged.nbytes(), device, stream);
  copy_within_device(dst, staged);
}

void copy_to_host(const Tensor& dst, const Tensor& src) {
  const Tensor s = strip_broadcast(src);
  const DType moved = transfer_dtype(s.dtype(), dst.dtype(), dst.dtype());
  const Tensor dev = dense_on_device(s, moved);
  const int device = dev.device().index();
  const cudaStream_t stream = current_stream(device);
  if (is_plain_target(dst, dev)) {
    copy_device_to_host(dst.data_ptr(), dev.data_ptr(), dst.nbytes(), device, stream);
    return;
  }
  Tensor host = Tensor::empty(dev.shape(), moved);
  copy_device_to_host(host.data_ptr(), dev.data_ptr(), host.nbytes(), device, stream);
  Tensor(dst).copy_(host);  // converts and broadcasts on the host
}

// `waiter` (a stream of waiter_device) waits for the work queued so far on `signaler`
// (a stream of signaler_device).
void stream_wait(cudaStream_t waiter, int waiter_device, cudaStream_t signaler,
                 int signaler_device) {
  auto& events = detail::EventPool::instance();
  cudaEvent_t e = events.acquire(signaler_device);
  cudaError_t err;
  {
    DeviceGuard on_signaler(signaler_device);
    err = cudaEventRecord(e, signaler);
  }
  if (err == cudaSuccess) {
    DeviceGuard on_waiter(waiter_device);
    err = cudaStreamWaitEvent(waiter, e, 0);
  }
  // A wait captures the event's state when it is issued, so the event can be
  // recorded again by its next user at once.
  events.release(signaler_device, e);
  if (err != cudaSuccess) {
    detail::throw_cuda_error(err, "cudaStreamWaitEvent", "copy_", __FILE__, __LINE__);
  }
}

// Different devices: the copy runs on the source device's stream, ordered after the
// work queued on the destination's stream (which may still use dst's memory), and
// the destination's stream waits for it, as torch does.
void copy_between_devices(const Tensor& dst, const Tensor& src) {
  const Tensor s = strip_broadcast(src);
  const DType moved = transfer_dtype(s.dtype(), dst.dtype(), s.dtype());
  const Tensor from = dense_on_device(s, moved);
  const int src_device = src.device().index(), dst_device = dst.device().index();
  const Tensor to = is_plain_target(dst, from) ? dst : Tensor::empty(from.shape(), moved, dst.device());
  const cudaStream_t src_stream = current_stream(src_device);
  const cudaStream_t dst_stream = current_stream(dst_device);
  stream_wait(src_stream, src_device, dst_stream, dst_device);
  {
    DeviceGuard guard(src_device);
    // Without peer access the driver stages through host memory itself.
    THD_CUDA_CHECK(cudaMemcpyPeerAsync(to.data_ptr(), dst_device, from.data_ptr(), src_device,
                                       from.nbytes(), src_stream),
                   "copy_");
  }
  stream_wait(dst_stream, dst_device, src_stream, src_device);
  if (!to.shares_storage(dst)) copy_within_device(dst, to);
}

}  // namespace

void copy_host_to_device(void* dst, const void* src, size_t nbytes, int device,
                         cudaStream_t stream) {
  if (nbytes == 0) return;
  DeviceGuard guard(device);
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const size_t chunk = std::min(nbytes, kChunk);
  std::array<PinnedBuffer, kStagingBuffers> staging;
  for (size_t off = 0, k = 0; off < nbytes; off += chunk, ++k) {
    PinnedBuffer& buf = staging[k % kStagingBuffers];
    if (buf.data() == nullptr) buf = PinnedBuffer(chunk);
    const size_t n = std::min(chunk, nbytes - off);
    buf.wait_uses();  // the copy that read this buffer last is done
    host_copy(buf.data(), s + off, n);
    THD_CUDA_CHECK(cudaMemcpyAsync(d + off, buf.data(), n, cudaMemcpyHostToDevice, stream),
                   "copy_");
    buf.record_use(stream, device);
  }
  // The buffers go back to the cache with their last copies pending; the cache hands
  // them out again only when those completed.
}

void copy_device_to_host(void* dst, const void* src, size_t nbytes, int device,
                         cudaStream_t stream) {
  if (nbytes == 0) return;
  DeviceGuard guard(device);
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  const size_t chunk = std::min(nbytes, kChunk);
  const size_t chunks = (nbytes + chunk - 1) / chunk;
  std::array<PinnedBuffer, kStagingBuffers> staging;
  auto issue = [&](size_t k) {
    PinnedBuffer& buf = staging[k % kStagingBuffers];
    if (buf.data() == nullptr) buf = PinnedBuffer(chunk);
    const size_t off = k * chunk;
    THD_CUDA_CHECK(cudaMemcpyAsync(buf.data(), s + off, std::min(chunk, nbytes - off),
                                   cudaMemcpyDeviceToHost, stream),
                   "copy_");
    buf.record_use(stream, device);
  };
  for (size_t k = 0; k < std::min(chunks, kStagingBuffers); ++k) issue(k);
  for (size_t k = 0; k < chunks; ++k) {
    PinnedBuffer& buf = staging[k % kStagingBuffers];
    buf.wait_uses();  // chunk k has landed; chunk k + 1 is on its way meanwhile
    const size_t off = k * chunk;
    host_copy(d + off, buf.data(), std::min(chunk, nbytes - off));
    if (k + kStagingBuffers < chunks) issue(k + kStagingBuffers);
  }
}

void copy_tensor(const Tensor& dst, const Tensor& src) {
  const bool dst_cuda = dst.device().is_cuda(), src_cuda = src.device().is_cuda();
  if (dst_cuda && src_cuda) {
    if (dst.device() == src.device()) {
      copy_within_device(dst, src);
    } else {
      copy_between_devices(dst, src);
    }
  } else if (dst_cuda) {
    copy_to_device(dst, src);
  } else {
    copy_to_host(dst, src);
  }
}

}  // namespace thd::cuda
