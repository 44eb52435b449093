// The NCCL operations: each checks its arguments on the calling rank, then hands
// the Runner the NCCL calls to enqueue.
#include "datachannel/nccl/nccl_collectives.h"

#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "datachannel/channel_util.h"
#include "datachannel/check.h"
#include "datachannel/collectives/float32_accumulation.h"
#include "datachannel/nccl/nccl_device.h"
#include "datachannel/nccl/nccl_runner.h"
#include "datachannel/nccl/nccl_types.h"

namespace thd::detail::nccl {

struct NcclCollectives::Impl : Runner {
  using Runner::Runner;
};

namespace {

constexpr int64_t kMaxCollectiveTag = INT32_MAX;
constexpr int64_t kMaxP2PTag = INT64_MAX;

// ValueError unless `t` is a CUDA tensor (contiguous too when it is written).
void check_on_device(const GroupState& g, const Tensor& t, std::string_view op, std::string_view what, bool written) {
  if (!t.defined()) {
    THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1, "{} is an undefined tensor", what);
  }
  if (!t.device().is_cuda()) {
    THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1,
                 "{} is on {}; NCCL moves CUDA tensors only (a CPU tensor goes through the channel's host "
                 "transport: call the DataChannel's {} with it)",
                 what, t.device().str(), op);
  }
  if (written && !t.is_contiguous()) {
    THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1,
                 "{} must be contiguous, since it is written in place (shape {}, strides {}); use t.contiguous() "
                 "and copy back",
                 what, t.shape(), t.strides());
  }
}

void check_same_device(const GroupState& g, const Tensor& output, const Tensor& input, std::string_view op) {
  if (output.device() == input.device()) return;
  THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1,
               "output is on {} but input is on {}; NCCL runs a rank on one GPU, so both must be there",
               output.device().str(), input.device().str());
}

void check_same_dtype(const GroupState& g, const Tensor& output, const Tensor& input, std::string_view op) {
  if (output.dtype() == input.dtype()) return;
  THD_THROW_AT(TypeError, std::string(op), g.world_rank(), -1, "output is {} but input is {}; they must match",
               dtype_name(output.dtype()), dtype_name(input.dtype()));
}

void check_numel(const GroupState& g, const Tensor& t, int64_t expected, std::string_view op, std::string_view what,
                 std::string_view rule) {
  if (t.numel() == expected) return;
  THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1, "{} has {} elements (shape {}) but must have {} ({})",
               what, t.numel(), t.shape(), expected, rule);
}

// An input read while outputs are written: a private copy (enqueued on the same
// stream) when it shares memory with the output.
Tensor readable_input(const Tensor& input, const Tensor& output) {
  if (output.defined() && input.shares_storage(output)) return input.clone();
  return input.contiguous();
}

// What every collective checks first: the caller is a member, the tag in range.
void check_call(const GroupState& g, const CollectiveOptions& o, const char* op) {
  check_member(g, op);
  check_tag(g, o.tag, op, kMaxCollectiveTag);
}

// An input read and an output written, in this order of checks: both CUDA tensors
// (the output contiguous), on one device, of one dtype.
void check_input_output(const GroupState& g, const Tensor& out, const Tensor& in, std::string_view op,
                        std::string_view out_what = "output", std::string_view in_what = "input") {
  check_on_device(g, in, op, in_what, false);
  check_on_device(g, out, op, out_what, true);
  check_same_device(g, out, in, op);
  check_same_dtype(g, out, in, op);
}

template <typename T>
T* bytes_at(const Tensor& t, size_t offset = 0) {
  return static_cast<T*>(t.data_ptr()) + offset;
}

// Several NCCL calls as one group: they progress together, and NCCL matches them
// as one operation.
template <typename Body>
ncclResult_t grouped(const CallSite& site, Body&& body) {
  THD_NCCL_CALL(ncclGroupStart(), site);
  try {
    body();
  } catch (...) {
    (void)ncclGroupEnd();
    throw;
  }
  return THD_NCCL_CALL(ncclGroupEnd(), site);
}

int device_of(const Tensor& t) { return t.device().index(); }

// What a reduction of `t` by `op` runs on: `t` itself, or for float16 and
// bfloat16 sums, averages and products (NCCL would reduce in 16 bits, rounding
// every step) a float32 copy made on the stream now, which `launch` keeps and, when
// write_back, rounds into `t` once after the NCCL call (float32_accumulation.h).
Tensor accumulating_copy(const Tensor& t, ReduceOp op, Launch& launch, bool write_back) {
  if (!accumulates_in_float32(t.dtype(), op)) return t;
  Tensor wide = t.to(kFloat32);
  launch.keep.push_back(wide);
  if (write_back) {
    launch.then = [narrow = t, wide]() mutable { narrow.copy_(wide); };
  }
  return wide;
}

}  // namespace

NcclCollectives::NcclCollectives(int world_rank, int world_size)
    : impl_(std::make_unique<Impl>(world_rank, world_size)) {}
NcclCollectives::~NcclCollectives() = default;

NcclCollectives::Stats NcclCollectives::stats() const noexcept { return impl_->stats(); }

Request NcclCollectives::all_reduce(GroupState& g, Tensor& t, ReduceOp op, const CollectiveOptions& o) {
  const char* name = "all_reduce";
  check_call(g, o, name);
  check_on_device(g, t, name, "the tensor", true);
  (void)reduction_for(t.dtype(), op, name);
  if (t.numel() == 0) return Request();
  const auto count = static_cast<size_t>(t.numel());
  Launch launch{.op = name, .device = device_of(t), .timeout = resolve_timeout(g, o.timeout),
                .keep = {t}, .bytes = t.nbytes()};
  const Tensor work = accumulating_copy(t, op, launch, /*write_back=*/true);
  const Reduction r = reduction_for(work.dtype(), op, name);
  void* data = work.data_ptr();
  launch.enqueue = [=](ncclComm_t c, cudaStream_t s, const CallSite& site) {
    return THD_NCCL_CALL(ncclAllReduce(data, data, count, r.type, r.op, c, s), site);
  };
  return impl_->run(g, std::move(launch));
}

Request NcclCollectives::broadcast(GroupState& g, Tensor& t, int root, const CollectiveOptions& o) {
  const char* name = "broadcast";
  check_call(g, o, name);
  check_rank(g, root, name, "root");
  check_on_device(g, t, name, "the tensor", true);
  if (t.numel() == 0) return Request();
  void* data = t.data_ptr();
  const size_t nbytes = t.nbytes();
  Launch launch{.op = name, .device = device_of(t), .timeout = resolve_timeout(g, o.timeout),
                .keep = {t}, .bytes = nbytes};
  launch.enqueue = [=](ncclComm_t c, cudaStream_t s, const CallSite& site) {
    return THD_NCCL_CALL(ncclBroadcast(data, data, nbytes, ncclInt8, root, c, s), site);
  };
  return impl_->run(g, std::move(launch));
}

Request NcclCollectives::reduce(GroupState& g, Tensor& t, int root, ReduceOp op, const CollectiveOptions& o) {
  const char* name = "reduce";
  check_call(g, o, name);
  check_rank(g, root, name, "root");
  check_on_device(g, t, name, "the tensor", true);
  (void)reduction_for(t.dtype(), op, name);
  if (t.numel() == 0) return Request();
  const auto count = static_cast<size_t>(t.numel());
  Launch launch{.op = name, .device = device_of(t), .timeout = resolve_timeout(g, o.timeout),
                .keep = {t}, .bytes = t.nbytes()};
  const Tensor work = accumulating_copy(t, op, launch, /*write_back=*/g.rank == root);
  const Reduction r = reduction_for(work.dtype(), op, name);
  void* data = work.data_ptr();
  launch.enqueue = [=](ncclComm_t c, cudaStream_t s, const CallSite& site) {
    return THD_NCCL_CALL(ncclReduce(data, data, count, r.type, r.op, root, c, s), site);
  };
  return impl_->run(g, std::move(launch));
}

Request NcclCollectives::all_gather(GroupState& g, Tensor& out, const Tensor& in, const CollectiveOptions& o) {
  const char* name = "all_gather";
  check_call(g, o, name);
  check_input_output(g, out, in, name);
  check_numel(g, out, g.size() * in.numel(), name, "output", "group size x input elements");
  if (in.numel() == 0) return Request();
  const Tensor src = readable_input(in, out);
  const void* from = src.data_ptr();
  void* to = out.data_ptr();
  const size_t block = src.nbytes();
  Launch launch{.op = name, .device = device_of(out), .timeout = resolve_timeout(g, o.timeout),
                .keep = {out, src}, .bytes = out.nbytes()};
  launch.enqueue = [=](ncclComm_t c, cudaStream_t s, const CallSite& site) {
    return THD_NCCL_CALL(ncclAllGather(from, to, block, ncclInt8, c, s), site);
  };
  return impl_->run(g, std::move(launch));
}

Request NcclCollectives::reduce_scatter(GroupState& g, Tensor& out, const Tensor& in, ReduceOp op,
                                        const CollectiveOptions& o) {
  const char* name = "reduce_scatter";
  check_call(g, o, name);
  check_input_output(g, out, in, name);
  (void)reduction_for(in.dtype(), op, name);
  check_numel(g, in, g.size() * out.numel(), name, "input", "group size x output elements");
  if (out.numel() == 0) return Request();
  const auto count = static_cast<size_t>(out.numel());
  Launch launch{.op = name, .device = device_of(out), .timeout = resolve_timeout(g, o.timeout),
                .keep = {out}, .bytes = out.nbytes()};
  // Widened, the input is a private copy already, and the output is written only
  // by the rounding of its float32 result.
  const bool widen = accumulates_in_float32(in.dtype(), op);
  const Tensor src = widen ? in.to(kFloat32) : readable_input(in, out);
  Tensor dst = out;
  if (widen) {
    dst = Tensor::empty(out.shape(), kFloat32, out.device());
    launch.keep.push_back(dst);
    launch.then = [narrow = out, dst]() mutable { narrow.copy_(dst); };
  }
  launch.keep.push_back(src);
  const Reduction r = reduction_for(src.dtype(), op, name);
  const void* from = src.data_ptr();
  void* to = dst.data_ptr();
  launch.enqueue = [=](ncclComm_t c, cudaStream_t s, const CallSite& site) {
    return THD_NCCL_CALL(ncclReduceScatter(from, to, count, r.type, r.op, c, s), site);
  };
  return impl_->run(g, std::move(launch));
}

Request NcclCollectives::gather(GroupState& g, Tensor& out, const Tensor& in, int root, const CollectiveOptions& o) {
  const char* name = "gather";
  check_call(g, o, name);
  check_rank(g, root, name, "root");
  const bool is_root = g.rank == root;
  if (is_root) {
    check_input_output(g, out, in, name, "output (on the root)");
    check_numel(g, out, g.size() * in.numel(), name, "output", "group size x input elements");
  } else {
    check_on_device(g, in, name, "input", false);
  }
  if (in.numel() == 0) return Request();
  const Tensor src = readable_input(in, is_root ? out : Tensor());
  const size_t block = src.nbytes();
  const int members = g.size();
  std::vector<Tensor> keep{src};
  if (is_root) keep.push_back(out);
  const uint8_t* from = bytes_at<const uint8_t>(src);
  uint8_t* to = is_root ? bytes_at<uint8_t>(out) : nullptr;
  Launch launch{.op = name, .device = device_of(in), .timeout = resolve_timeout(g, o.timeout),
                .keep = std::move(keep), .bytes = block};
  launch.enqueue = [=](ncclComm_t c, cudaStream_t s, const CallSite& site) {
    return grouped(site, [&] {
      if (to != nullptr) {
        for (int r = 0; r < members; ++r) {
          THD_NCCL_CALL(ncclRecv(to + static_cast<size_t>(r) * block, block, ncclInt8, r, c, s), site);
        }
      }
      THD_NCCL_CALL(ncclSend(from, block, ncclInt8, root, c, s), site);
    });
  };
  return impl_->run(g, std::move(launch));
}

Request NcclCollectives::scatter(GroupState& g, Tensor& out, const Tensor& in, int root, const CollectiveOptions& o) {
  const char* name = "scatter";
  check_call(g, o, name);
  check_rank(g, root, name, "root");
  const bool is_root = g.rank == root;
  Tensor src;
  if (is_root) {
    check_input_output(g, out, in, name, "output", "input (on the root)");
    check_numel(g, in, g.size() * out.numel(), name, "input", "group size x output elements");
  } else {
    check_on_device(g, out, name, "output", true);
  }
  if (out.numel() == 0) return Request();
  if (is_root) src = readable_input(in, out);
  const size_t block = out.nbytes();
  const int members = g.size();
  std::vector<Tensor> keep{out};
  if (is_root) keep.push_back(src);
  const uint8_t* from = is_root ? bytes_at<const uint8_t>(src) : nullptr;
  uint8_t* to = bytes_at<uint8_t>(out);
  Launch launch{.op = name, .device = device_of(out), .timeout = resolve_timeout(g, o.timeout),
                .keep = std::move(keep), .bytes = block};
  launch.enqueue = [=](ncclComm_t c, cudaStream_t s, const CallSite& site) {
    return grouped(site, [&] {
      if (from != nullptr) {
        for (int r = 0; r < members; ++r) {
          THD_NCCL_CALL(ncclSend(from + static_cast<size_t>(r) * block, block, ncclInt8, r, c, s), site);
        }
      }
      THD_NCCL_CALL(ncclRecv(to, block, ncclInt8, root, c, s), site);
    });
  };
  return impl_->run(g, std::move(launch));
}

Request NcclCollectives::all_to_all(GroupState& g, Tensor& out, const Tensor& in, const CollectiveOptions& o) {
  const char* name = "all_to_all";
  check_call(g, o, name);
  check_input_output(g, out, in, name);
  check_numel(g, out, in.numel(), name, "output", "as many as the input");
  if (in.numel() % g.size() != 0) {
    THD_THROW_AT(ValueError, name, g.world_rank(), -1,
                 "input has {} elements, which do not split into {} equal blocks (one per rank)", in.numel(),
                 g.size());
  }
  if (in.numel() == 0) return Request();
  const Tensor src = readable_input(in, out);
  const size_t block = src.nbytes() / static_cast<size_t>(g.size());
  const int members = g.size();
  const uint8_t* from = bytes_at<const uint8_t>(src);
  uint8_t* to = bytes_at<uint8_t>(out);
  Launch launch{.op = name, .device = device_of(out), .timeout = resolve_timeout(g, o.timeout),
                .keep = {out, src}, .bytes = out.nbytes()};
  launch.enqueue = [=](ncclComm_t c, cudaStream_t s, const CallSite& site) {
    return grouped(site, [&] {
      for (int r = 0; r < members; ++r) {
        const size_t at = static_cast<size_t>(r) * block;
        THD_NCCL_CALL(ncclSend(from + at, block, ncclInt8, r, c, s), site);
        THD_NCCL_CALL(ncclRecv(to + at, block, ncclInt8, r, c, s), site);
      }
    });
  };
  return impl_->run(g, std::move(launch));
}

bool NcclCollectives::usable_on(GroupState& g, int device) { return impl_->usable_on(g, device); }

Request NcclCollectives::barrier(GroupState& g, const CollectiveOptions& o) {
  const char* name = "barrier";
  check_call(g, o, name);
  // The group's GPU once it has a communicator; before, this rank's default one.
  const std::optional<int> known = impl_->group_device(g);
  const int device = known ? *known : default_device(name, g.world_rank());
  // A byte summed over the members: no member's result is ready before every
  // member's work issued before it has run.
  Tensor token = Tensor::empty({1}, kUInt8, Device::cuda(device));
  void* data = token.data_ptr();
  Launch launch{.op = name, .device = device, .timeout = resolve_timeout(g, o.timeout),
                .keep = {token}, .bytes = 0};
  launch.enqueue = [=](ncclComm_t c, cudaStream_t s, const CallSite& site) {
    return THD_NCCL_CALL(ncclAllReduce(data, data, 1, ncclUint8, ncclSum, c, s), site);
  };
  return impl_->run(g, std::move(launch));
}

Request NcclCollectives::send(GroupState& g, const Tensor& tensor, int dst, const P2POptions& o) {
  const char* name = "send";
  check_member(g, name);
  check_rank(g, dst, name, "destination");
  check_tag(g, o.tag, name, kMaxP2PTag);
  check_on_device(g, tensor, name, "the tensor", false);
  if (dst == g.rank) {
    THD_THROW_AT(ValueError, name, g.world_rank(), g.world_rank(),
                 "a rank cannot send to itself one message at a time through NCCL (the send would wait for a "
                 "receive queued behind it on the device): use batch_send_recv, which issues both together");
  }
  if (tensor.numel() == 0) return Request();
  const Tensor src = tensor.contiguous();
  const void* from = src.data_ptr();
  const size_t nbytes = src.nbytes();
  const int peer = g.rank < dst ? 1 : 0;  // its rank in the pair's communicator
  Launch launch{.op = name, .device = device_of(src), .timeout = resolve_timeout(g, o.timeout),
                .keep = {src}, .bytes = nbytes, .pair_peer = dst};
  launch.enqueue = [=](ncclComm_t c, cudaStream_t s, const CallSite& site) {
    return THD_NCCL_CALL(ncclSend(from, nbytes, ncclInt8, peer, c, s), site);
  };
  return impl_->run(g, std::move(launch));
}

Request NcclCollectives::recv(GroupState& g, Tensor& tensor, int src, const P2POptions& o) {
  const char* name = "recv";
  check_member(g, name);
  if (src == kAnySource) {
    THD_THROW_AT(ValueError, name, g.world_rank(), -1,
                 "NCCL receives from a named rank only: kAnySource is not supported for CUDA tensors");
  }
  check_rank(g, src, name, "source");
  check_tag(g, o.tag, name, kMaxP2PTag);
  check_on_device(g, tensor, name, "the tensor", true);
  if (src == g.rank) {
    THD_THROW_AT(ValueError, name, g.world_rank(), g.world_rank(),
                 "a rank cannot receive from itself one message at a time through NCCL: use batch_send_recv, "
                 "which issues the send and the receive together");
  }
  if (tensor.numel() == 0) return Request();
  void* to = tensor.data_ptr();
  const size_t nbytes = tensor.nbytes();
  const int peer = g.rank < src ? 1 : 0;
  const int source_world = (*g.world_ranks)[static_cast<size_t>(src)];
  Launch launch{.op = name, .device = device_of(tensor), .timeout = resolve_timeout(g, o.timeout),
                .keep = {tensor}, .bytes = nbytes, .source = source_world, .pair_peer = src};
  launch.enqueue = [=](ncclComm_t c, cudaStream_t s, const CallSite& site) {
    return THD_NCCL_CALL(ncclRecv(to, nbytes, ncclInt8, peer, c, s), site);
  };
  return impl_->run(g, std::move(launch));
}

Request NcclCollectives::batch_send_recv(GroupState& g, std::vector<P2PItem> items, const CollectiveOptions& o) {
  const char* name = "batch_send_recv";
  check_call(g, o, name);
  if (items.empty()) return Request();
  struct Move {
    bool send;
    uint8_t* data;
    size_t nbytes;
    int peer;
  };
  std::vector<Move> moves;
  std::vector<Tensor> keep;
  size_t total = 0;
  for (auto& item : items) {
    const bool send = item.kind == P2PItem::Kind::Send;
    check_rank(g, item.peer, name, send ? "destination" : "source");
    check_on_device(g, item.tensor, name, send ? "a send's tensor" : "a receive's tensor", !send);
    if (item.tensor.device() != items.front().tensor.device()) {
      THD_THROW_AT(ValueError, name, g.world_rank(), -1,
                   "the tensors are on {} and {}; NCCL runs a rank on one GPU, so all must be on one",
                   items.front().tensor.device().str(), item.tensor.device().str());
    }
    Tensor t = send ? item.tensor.contiguous() : item.tensor;
    if (t.numel() > 0) moves.push_back({send, bytes_at<uint8_t>(t), t.nbytes(), item.peer});
    total += t.nbytes();
    keep.push_back(std::move(t));
  }
  if (moves.empty()) return Request();
  Launch launch{.op = name, .device = device_of(items.front().tensor), .timeout = resolve_timeout(g, o.timeout),
                .keep = std::move(keep), .bytes = total};
  launch.enqueue = [moves = std::move(moves)](ncclComm_t c, cudaStream_t s, const CallSite& site) {
    return grouped(site, [&] {
      for (const Move& m : moves) {
        if (m.send) {
          THD_NCCL_CALL(ncclSend(m.data, m.nbytes, ncclInt8, m.peer, c, s), site);
        } else {
          THD_NCCL_CALL(ncclRecv(m.data, m.nbytes, ncclInt8, m.peer, c, s), site);
        }
      }
    });
  };
  return impl_->run(g, std::move(launch));
}

}  // namespace thd::detail::nccl
