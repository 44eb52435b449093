// copy_on_device and fill_on_device (copy_kernel.h) over the generic elementwise
// launch. A copy between dtypes converts with the CPU's rules; a copy within one dtype
// and a fill move bits, so they are compiled once per element size, not per dtype.
#include "tensor/cuda/copy_kernel.h"

#include <cstring>

#include "tensor/cuda/elementwise_loops.cuh"

namespace thd::cuda {
namespace {

// The value itself: the conversion of a copy is the kernel's store (cast_like_cpu).
struct Identity {
  template <typename C>
  __device__ C operator()(C x) const {
    return x;
  }
};

// Every element the same bits.
template <typename U>
struct Constant {
  U bits;
  __device__ U operator()() const { return bits; }
};

// The unsigned integer of `bytes` bytes.
template <size_t bytes>
using Bits = std::conditional_t<
    bytes == 1, uint8_t,
    std::conditional_t<bytes == 2, uint16_t, std::conditional_t<bytes == 4, uint32_t, uint64_t>>>;

// Calls f(Tag<Bits<element size>>{}).
template <typename F>
void dispatch_bits(size_t element_size, F&& f) {
  switch (element_size) {
    case 1: return f(Tag<uint8_t>{});
    case 2: return f(Tag<uint16_t>{});
    case 4: return f(Tag<uint32_t>{});
    default: return f(Tag<uint64_t>{});
  }
}

template <typename U>
void fill_bits(const char* op, const Tensor& self, U bits) {
  unsigned char bytes[sizeof(U)];
  std::memcpy(bytes, &bits, sizeof(U));
  bool one_byte = true;  // every byte the same: a memset does it
  for (size_t i = 1; i < sizeof(U); ++i) one_byte = one_byte && bytes[i] == bytes[0];
  if (one_byte && self.is_contiguous()) {
    const int device = self.device().index();
    DeviceGuard guard(device);
    THD_CUDA_CHECK(
        cudaMemsetAsync(self.data_ptr(), bytes[0], self.nbytes(), current_stream(device)), op);
    return;
  }
  launch_elementwise<U>(op, Constant<U>{bits}, self);
}

}  // namespace

void copy_on_device(const Tensor& dst, const Tensor& src, const char* op) {
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype()) {
    if (dst.is_contiguous() && src.is_contiguous() && dst.shape() == src.shape()) {
      const int device = dst.device().index();
      DeviceGuard guard(device);
      THD_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(),
                                     cudaMemcpyDeviceToDevice, current_stream(device)),
                     op);
      return;
    }
    dispatch_bits(dst.element_size(), [&](auto tag) {
      using U = typename decltype(tag)::type;
      launch_elementwise<U>(op, Identity{}, dst, tensor_input<U>(src));
    });
    return;
  }
  dispatch<thd::detail::kAllSet>(dst.dtype(), op, [&](auto out_tag) {
    using Out = typename decltype(out_tag)::type;
    dispatch<thd::detail::kAllSet>(src.dtype(), op, [&](auto in_tag) {
      using In = typename decltype(in_tag)::type;
      if constexpr (!std::is_same_v<Out, In>) {
        launch_elementwise<Out>(op, Identity{}, dst, tensor_input<In>(src));
      }
    });
  });
}

void fill_on_device(const Tensor& self, Scalar value, const char* op) {
  if (self.numel() == 0) return;
  dispatch<thd::detail::kAllSet>(self.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = scalar_as<T>(value);
    Bits<sizeof(T)> bits;
    std::memcpy(&bits, &v, sizeof(T));
    fill_bits(op, self, bits);
  });
}

}  // namespace thd::cuda
