// The entry points of algorithms.h: argument checks every rank makes alike (so
// a bad call fails on every rank before any message moves), the trivial cases
// (size-1 groups copy, empty buffers do nothing) and the choice of algorithm.
#include "datachannel/collectives/select.h"

#include <cstdlib>
#include <string_view>

#include "datachannel/check.h"
#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/float32_accumulation.h"
#include "datachannel/collectives/reduce_kernels.h"
#include "datachannel/host_collectives.h"
#include "tensor/env_setting.h"

namespace thd::detail {

namespace {

// The value of an override variable, or empty when unset.
std::string_view env_choice(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string_view() : std::string_view(v);
}

[[noreturn]] void bad_choice(const char* name, std::string_view value, const char* accepted) {
  THD_THROW(ValueError, "collective algorithm", "{}={} is not an algorithm; use one of {} (or leave it unset)", name,
            value, accepted);
}

// A crossover in bytes: the variable `name` when set, else `fallback`. Asked on
// every collective call: an unset variable costs a getenv and nothing more.
size_t crossover_bytes(const char* name, size_t fallback) {
  const std::string_view v = env_choice(name);
  if (v.empty()) return fallback;
  return parse_whole_number_text({.name = name, .unit = "bytes"}, v, "collective algorithm");
}

void check_root(const Comm& comm, int root) {
  if (root >= 0 && root < comm.size()) return;
  THD_THROW(ValueError, comm.op(), "root {} is not a rank of this group of {}", root, comm.size());
}

void check_buffer(const Comm& comm, const void* p, size_t nbytes, const char* what) {
  if (p != nullptr || nbytes == 0) return;
  THD_THROW(ValueError, comm.op(), "{} is null but must hold {} bytes", what, nbytes);
}

// The backend's own collectives, when it has them and the group has others to
// meet (they may still decline the call).
HostCollectives* native_for(Comm& comm) {
  return comm.size() > 1 ? comm.transport().host_collectives() : nullptr;
}

}  // namespace

AllReduceAlgorithm choose_all_reduce(size_t nbytes, size_t count, int group_size) {
  const std::string_view forced = env_choice("THD_ALLREDUCE_ALGO");
  if (forced == "ring") return AllReduceAlgorithm::Ring;
  if (forced == "rd") return AllReduceAlgorithm::RecursiveDoubling;
  if (!forced.empty()) bad_choice("THD_ALLREDUCE_ALGO", forced, "ring, rd");
  // Fewer elements than ranks would leave ring ranks with empty blocks.
  const size_t rd_max = crossover_bytes("THD_ALLREDUCE_RD_MAX_BYTES", kAllReduceRecursiveDoublingMaxBytes);
  if (nbytes <= rd_max || count < static_cast<size_t>(group_size)) {
    return AllReduceAlgorithm::RecursiveDoubling;
  }
  return AllReduceAlgorithm::Ring;
}

BroadcastAlgorithm choose_broadcast(size_t nbytes, int group_size) {
  const std::string_view forced = env_choice("THD_BROADCAST_ALGO");
  if (forced == "tree") return BroadcastAlgorithm::BinomialTree;
  if (forced == "ring") return BroadcastAlgorithm::PipelinedRing;
  if (!forced.empty()) bad_choice("THD_BROADCAST_ALGO", forced, "tree, ring");
  // With two ranks both are one (chunked) message.
  const size_t tree_max = crossover_bytes("THD_BROADCAST_TREE_MAX_BYTES", kBroadcastTreeMaxBytes);
  if (nbytes <= tree_max || group_size <= 2) return BroadcastAlgorithm::BinomialTree;
  return BroadcastAlgorithm::PipelinedRing;
}

ReduceAlgorithm choose_reduce(size_t nbytes, int group_size) {
  if (nbytes >= crossover_bytes("THD_REDUCE_RING_MIN_BYTES", kReduceRingMinBytes) && group_size >= 3) {
    return ReduceAlgorithm::Ring;
  }
  return ReduceAlgorithm::BinomialTree;
}

void all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op) {
  check_reduce_op(dtype, op, comm.op());
  const size_t nbytes = count * element_size(dtype);
  check_buffer(comm, data, nbytes, "the buffer");
  if (nbytes == 0) return;
  if (comm.size() == 1) return finish_reduce(data, count, dtype, op, 1);
  // Widened here, before a backend's native collectives are offered the call, so
  // they see float32 too (MPI has no 16-bit types).
  if (accumulates_in_float32(dtype, op)) {
    return reduce_in_float32(data, count, dtype, /*write_back=*/true,
                             [&](float* wide) { all_reduce(comm, wide, count, DType::Float32, op); });
  }
  if (HostCollectives* native = native_for(comm); native && native->all_reduce(comm, data, count, dtype, op)) return;
  switch (choose_all_reduce(nbytes, count, comm.size())) {
    case AllReduceAlgorithm::RecursiveDoubling: return recursive_doubling_all_reduce(comm, data, count, dtype, op);
    case AllReduceAlgorithm::Ring: return ring_all_reduce(comm, data, count, dtype, op);
  }
}

void broadcast(Comm& comm, void* data, size_t nbytes, int root) {
  check_root(comm, root);
  check_buffer(comm, data, nbytes, "the buffer");
  if (nbytes == 0 || comm.size() == 1) return;
  if (HostCollectives* native = native_for(comm); native && native->broadcast(comm, data, nbytes, root)) return;
  switch (choose_broadcast(nbytes, comm.size())) {
    case BroadcastAlgorithm::BinomialTree: return binomial_tree_broadcast(comm, data, nbytes, root);
    case BroadcastAlgorithm::PipelinedRing: return pipelined_ring_broadcast(comm, data, nbytes, root);
  }
}

void reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root) {
  check_root(comm, root);
  check_reduce_op(dtype, op, comm.op());
  const size_t nbytes = count * element_size(dtype);
  check_buffer(comm, data, nbytes, "the buffer");
  if (nbytes == 0) return;
  if (comm.size() == 1) return finish_reduce(data, count, dtype, op, 1);
  if (accumulates_in_float32(dtype, op)) {
    return reduce_in_float32(data, count, dtype, /*write_back=*/comm.rank() == root,
                             [&](float* wide) { reduce(comm, wide, count, DType::Float32, op, root); });
  }
  switch (choose_reduce(nbytes, comm.size())) {
    case ReduceAlgorithm::BinomialTree: return binomial_tree_reduce(comm, data, count, dtype, op, root);
    case ReduceAlgorithm::Ring: return ring_reduce(comm, data, count, dtype, op, root);
  }
}

void all_gather(Comm& comm, const void* in, void* out, size_t nbytes_per_rank) {
  check_buffer(comm, in, nbytes_per_rank, "the input");
  check_buffer(comm, out, nbytes_per_rank, "the output");
  if (nbytes_per_rank == 0) return;
  if (HostCollectives* native = native_for(comm); native && native->all_gather(comm, in, out, nbytes_per_rank)) {
    return;
  }
  ring_all_gather(comm, in, out, nbytes_per_rank);
}

void reduce_scatter(Comm& comm, const void* in, void* out, size_t count_per_rank, DType dtype, ReduceOp op) {
  check_reduce_op(dtype, op, comm.op());
  const size_t nbytes = count_per_rank * element_size(dtype);
  check_buffer(comm, in, nbytes, "the input");
  check_buffer(comm, out, nbytes, "the output");
  if (nbytes == 0) return;
  if (comm.size() > 1 && accumulates_in_float32(dtype, op)) {
    const size_t in_count = count_per_rank * static_cast<size_t>(comm.size());
    return reduce_in_float32(in, in_count, out, count_per_rank, dtype, [&](const float* wide_in, float* wide_out) {
      reduce_scatter(comm, wide_in, wide_out, count_per_rank, DType::Float32, op);
    });
  }
  if (HostCollectives* native = native_for(comm);
      native && native->reduce_scatter(comm, in, out, count_per_rank, dtype, op)) {
    return;
  }
  ring_reduce_scatter(comm, in, out, count_per_rank, dtype, op);
}

void gather(Comm& comm, const void* in, void* out, size_t nbytes_per_rank, int root) {
  check_root(comm, root);
  check_buffer(comm, in, nbytes_per_rank, "the input");
  if (comm.rank() == root) check_buffer(comm, out, nbytes_per_rank, "the root's output");
  linear_gather(comm, in, out, nbytes_per_rank, root);
}

void scatter(Comm& comm, const void* in, void* out, size_t nbytes_per_rank, int root) {
  check_root(comm, root);
  if (comm.rank() == root) check_buffer(comm, in, nbytes_per_rank, "the root's input");
  check_buffer(comm, out, nbytes_per_rank, "the output");
  linear_scatter(comm, in, out, nbytes_per_rank, root);
}

void all_to_all(Comm& comm, const void* in, void* out, size_t nbytes_per_rank) {
  check_buffer(comm, in, nbytes_per_rank, "the input");
  check_buffer(comm, out, nbytes_per_rank, "the output");
  if (nbytes_per_rank == 0) return;
  if (HostCollectives* native = native_for(comm); native && native->all_to_all(comm, in, out, nbytes_per_rank)) {
    return;
  }
  pairwise_all_to_all(comm, in, out, nbytes_per_rank);
}

void barrier(Comm& comm) {
  if (HostCollectives* native = native_for(comm); native && native->barrier(comm)) return;
  dissemination_barrier(comm);
}

}  // namespace thd::detail
