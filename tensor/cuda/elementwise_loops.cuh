// The generic elementwise launch: out[i] = f(in0[i], in1[i], ...) over a CUDA output
// and its inputs (tensors broadcast to the output's shape, or values), in two kernels:
//
//  - flat: the output and every tensor input contiguous in one order (or an input
//    broadcast from one element). Grid-stride over 16-byte vectors of every operand
//    where their addresses allow, the unaligned head and the tail element by element;
//    64-bit indices, no division.
//  - strided: anything else, through an OffsetCalculator in 32-bit arithmetic; a
//    geometry beyond 32-bit offsets is split on the host into pieces that fit.
//
// Values are loaded as their storage type, widened to the compute type (to_compute),
// f is applied, and the result is narrowed to the output type with the CPU's
// conversion rules (cast_like_cpu), so a kernel's result is the CPU loop's.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <thd/tensor.h>

#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_stream.h"
#include "tensor/cuda/device_types.cuh"
#include "tensor/cuda/offset_calculator.cuh"

namespace thd::cuda {

// ---- conversions ------------------------------------------------------------------

// convert<To>(v) as the CPU does it: the CPU narrows double to a 16-bit float through
// float (two roundings), device_types' convert in one; everything else agrees.
template <typename To, typename From>
__host__ __device__ __forceinline__ To cast_like_cpu(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_reduced_float_v<To> && std::is_same_v<From, double>) {
    return convert<To>(static_cast<float>(v));
  } else {
    return convert<To>(v);
  }
}

// A thd::Scalar as storage type T, as the CPU's scalar_to<T> gives it.
template <typename T>
T scalar_as(const Scalar& s) {
  if (s.is_floating_point()) return cast_like_cpu<T>(s.to_double());
  if (s.is_bool()) return cast_like_cpu<T>(s.to_bool());
  return cast_like_cpu<T>(s.to_int64());
}

// One input of launch_elementwise, on the host: a tensor (element size sizeof(T);
// strides and broadcasting from the tensor) or a value of T every element reads.
template <typename T>
struct Input {
  const Tensor* tensor;  // nullptr: read `value`
  T value;
};
template <typename T>
Input<T> tensor_input(const Tensor& t) {
  return {&t, T{}};
}
template <typename T>
Input<T> value_input(T v) {
  return {nullptr, v};
}

inline constexpr int kThreads = 256;

// Multiprocessors of `device`, asked once.
inline int multiprocessor_count(int device) {
  static std::array<std::atomic<int>, 64> counts{};
  if (device < 0 || device >= static_cast<int>(counts.size())) device = 0;
  int n = counts[device].load(std::memory_order_relaxed);
  if (n == 0) {
    THD_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device),
                   "elementwise");
    counts[device].store(n, std::memory_order_relaxed);
  }
  return n;
}

// Blocks of kThreads for `work` items of one thread each: enough to fill every
// multiprocessor a few times over; grid-stride loops cover the rest.
inline unsigned grid_for(int64_t work, int device) {
  const int64_t cap = static_cast<int64_t>(multiprocessor_count(device)) * (2048 / kThreads) * 4;
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, cap)));
}

// The kernels and their arguments.
namespace elementwise_detail {

// ---- a tuple for kernel arguments ---------------------------------------------------

template <size_t I, typename T>
struct Leaf {
  T value;
};
template <typename Seq, typename... T>
struct PackImpl;
template <size_t... I, typename... T>
struct PackImpl<std::index_sequence<I...>, T...> : Leaf<I, T>... {};
// Trivially copyable when every T is, so it can be a kernel parameter.
template <typename... T>
using Pack = PackImpl<std::index_sequence_for<T...>, T...>;

template <size_t I, typename T>
__host__ __device__ __forceinline__ T& get(Leaf<I, T>& leaf) {
  return leaf.value;
}
template <size_t I, typename T>
__host__ __device__ __forceinline__ const T& get(const Leaf<I, T>& leaf) {
  return leaf.value;
}

// ---- operands -------------------------------------------------------------------------

// How a kernel reads one input.
enum class Access : uint8_t {
  kIndexed,    // at its address + offset (flat: element i)
  kBroadcast,  // flat only: one element at `data`, read once
  kValue,      // `value`
};

template <typename T>
struct Slot {
  const T* data;
  T value;
  Access access;
};

template <typename T, int Vec>
struct alignas(sizeof(T) * Vec) Vector {
  T v[Vec];
};

// Elements per vector: 16 bytes of the widest operand.
template <typename Out, typename... In>
inline constexpr int kVecOf = 16 / static_cast<int>(std::max({sizeof(Out), sizeof(In)...}));

// f's result narrowed to Out.
template <typename Out, typename F, typename... C>
__device__ __forceinline__ Out apply(const F& f, C... x) {
  return cast_like_cpu<Out>(f(x...));
}

// ---- flat kernel ----------------------------------------------------------------------

template <typename F, typename Out, typename... In>
struct FlatArgs {
  F f;
  Out* out;
  Pack<Slot<In>...> in;
  int64_t numel;
  int64_t head;  // elements before the first vector-aligned one
  int64_t nvec;  // whole vectors from `head` on; the rest is the tail
};

template <int Vec, typename T>
__device__ __forceinline__ Vector<T, Vec> load_vector(const Slot<T>& s, int64_t i) {
  if (s.access == Access::kIndexed) return *reinterpret_cast<const Vector<T, Vec>*>(s.data + i);
  Vector<T, Vec> r;
#pragma unroll
  for (int j = 0; j < Vec; ++j) r.v[j] = s.value;
  return r;
}

template <typename T>
__device__ __forceinline__ T load_flat(const Slot<T>& s, int64_t i) {
  return s.access == Access::kIndexed ? s.data[i] : s.value;
}

template <int Vec, typename F, typename Out, typename... In, size_t... I>
__device__ __forceinline__ void flat_body(const FlatArgs<F, Out, In...>& args,
                                          std::index_sequence<I...>) {
  Pack<Slot<In>...> in = args.in;
  // A broadcast input is read once, then used as a value.
  ((get<I>(in).access == Access::kBroadcast ? (void)(get<I>(in).value = *get<I>(in).data)
                                            : (void)0),
   ...);
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t v = tid; v < args.nvec; v += stride) {
    const int64_t i0 = args.head + v * Vec;
    Pack<Vector<In, Vec>...> x;
    ((get<I>(x) = load_vector<Vec>(get<I>(in), i0)), ...);
    Vector<Out, Vec> y;
#pragma unroll
    for (int j = 0; j < Vec; ++j) y.v[j] = apply<Out>(args.f, to_compute(get<I>(x).v[j])...);
    *reinterpret_cast<Vector<Out, Vec>*>(args.out + i0) = y;
  }
  // The head [0, head) and the tail [head + nvec * Vec, numel), one element each.
  const int64_t tail = args.head + args.nvec * Vec;
  const int64_t singles = args.head + (args.numel - tail);
  for (int64_t j = tid; j < singles; j += stride) {
    const int64_t i = j < args.head ? j : tail + (j - args.head);
    args.out[i] = apply<Out>(args.f, to_compute(load_flat(get<I>(in), i))...);
  }
}

template <int Vec, typename F, typename Out, typename... In>
__global__ void __launch_bounds__(kThreads) flat_kernel(const FlatArgs<F, Out, In...> args) {
  flat_body<Vec>(args, std::index_sequence_for<In...>{});
}

// ---- strided kernel -------------------------------------------------------------------

template <typename F, typename Out, typename... In>
struct StridedArgs {
  F f;
  char* out;
  Pack<Slot<In>...> in;  // data: element 0 of the piece
  OffsetCalculator<1 + sizeof...(In)> offsets;
  uint32_t numel;
};

template <typename T>
__device__ __forceinline__ T load_at(const Slot<T>& s, int32_t byte_offset) {
  if (s.access == Access::kValue) return s.value;
  return *reinterpret_cast<const T*>(reinterpret_cast<const char*>(s.data) + byte_offset);
}

template <typename F, typename Out, typename... In, size_t... I>
__device__ __forceinline__ void strided_body(const StridedArgs<F, Out, In...>& args,
                                             std::index_sequence<I...>) {
  constexpr int N = 1 + sizeof...(In);
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < args.numel; i += stride) {
    int32_t off[N];
    args.offsets.get(i, off);
    *reinterpret_cast<Out*>(args.out + off[0]) =
        apply<Out>(args.f, to_compute(load_at(get<I>(args.in), off[I + 1]))...);
  }
}

template <typename F, typename Out, typename... In>
__global__ void __launch_bounds__(kThreads) strided_kernel(const StridedArgs<F, Out, In...> args) {
  strided_body(args, std::index_sequence_for<In...>{});
}

// ---- launch -----------------------------------------------------------------------------

template <typename T>
Slot<T> slot_of(const Input<T>& in, char* base, Access indexed) {
  if (in.tensor == nullptr) return {nullptr, in.value, Access::kValue};
  return {reinterpret_cast<const T*>(base), T{}, indexed};
}

template <typename Out, size_t... I, typename F, typename... In>
void launch_flat(std::index_sequence<I...>, const char* op, cudaStream_t stream, int device,
                 const F& f, const Geometry<1 + sizeof...(In)>& g, const Input<In>&... inputs) {
  constexpr int N = 1 + sizeof...(In);
  constexpr int Vec = kVecOf<Out, In...>;
  const std::array<int64_t, N> elem{static_cast<int64_t>(sizeof(Out)),
                                    static_cast<int64_t>(sizeof(In))...};
  // Per operand: indexed (contiguous) or read once.
  std::array<bool, N> indexed;
  for (int k = 0; k < N; ++k) {
    indexed[k] = g.base[k] != nullptr && (g.ndim() == 0 || g.strides[0][k] != 0);
  }
  FlatArgs<F, Out, In...> args{f, reinterpret_cast<Out*>(g.base[0]), {}, g.numel, 0, 0};
  ((get<I>(args.in) =
        slot_of(inputs, g.base[I + 1], indexed[I + 1] ? Access::kIndexed : Access::kBroadcast)),
   ...);
  // Vectors need every indexed operand equally far from a Vec-element boundary.
  int64_t misalign = -1;
  bool vectorizable = true;
  for (int k = 0; k < N && vectorizable; ++k) {
    if (!indexed[k]) continue;
    const auto addr = reinterpret_cast<uintptr_t>(g.base[k]);
    const auto es = static_cast<uintptr_t>(elem[k]);
    const auto m = static_cast<int64_t>((addr / es) % Vec);
    vectorizable = addr % es == 0 && (misalign < 0 || misalign == m);
    misalign = m;
  }
  if (vectorizable && misalign >= 0) {
    args.head = std::min<int64_t>((Vec - misalign) % Vec, g.numel);
    args.nvec = (g.numel - args.head) / Vec;
  }
  const int64_t singles = g.numel - args.nvec * Vec;
  flat_kernel<Vec><<<grid_for(std::max(args.nvec, singles), device), kThreads, 0, stream>>>(args);
  THD_CUDA_CHECK_LAUNCH(op);
}

template <typename Out, size_t... I, typename F, typename... In>
void launch_strided(std::index_sequence<I...>, const char* op, cudaStream_t stream, int device,
                    const F& f, const Geometry<1 + sizeof...(In)>& g,
                    const Input<In>&... inputs) {
  for_each_32bit_piece(g, [&](const Geometry<1 + sizeof...(In)>& piece) {
    StridedArgs<F, Out, In...> args{f, piece.base[0], {},
                                    OffsetCalculator<1 + sizeof...(In)>(piece),
                                    static_cast<uint32_t>(piece.numel)};
    ((get<I>(args.in) = slot_of(inputs, piece.base[I + 1], Access::kIndexed)), ...);
    strided_kernel<<<grid_for(piece.numel, device), kThreads, 0, stream>>>(args);
    THD_CUDA_CHECK_LAUNCH(op);
  });
}

}  // namespace elementwise_detail

// out[i] = f(inputs[i]...) for every element of out, a CUDA tensor whose element size
// is sizeof(Out); each tensor input has element size sizeof(In), lives on out's device
// and broadcasts to out's shape. f gets the inputs' compute types (to_compute) and its
// result is narrowed to Out. Asynchronous on current_stream(out's device).
template <typename Out, typename F, typename... In>
void launch_elementwise(const char* op, const F& f, const Tensor& out, const Input<In>&... inputs) {
  constexpr int N = 1 + sizeof...(In);
  if (out.numel() == 0) return;
  const int device = out.device().index();
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  const Geometry<N> g = make_geometry<N>({&out, inputs.tensor...});
  const std::array<int64_t, N> elem{static_cast<int64_t>(sizeof(Out)),
                                    static_cast<int64_t>(sizeof(In))...};
  // Flat: every operand contiguous over the one merged dim, or read once.
  bool flat = g.ndim() == 0;
  if (g.ndim() == 1) {
    flat = g.strides[0][0] == elem[0];
    for (int k = 1; k < N && flat; ++k) {
      flat = g.strides[0][k] == 0 || g.strides[0][k] == elem[k];
    }
  }
  constexpr auto indices = std::index_sequence_for<In...>{};
  if (flat) {
    elementwise_detail::launch_flat<Out>(indices, op, stream, device, f, g, inputs...);
  } else {
    elementwise_detail::launch_strided<Out>(indices, op, stream, device, f, g, inputs...);
  }
}

}  // namespace thd::cuda
