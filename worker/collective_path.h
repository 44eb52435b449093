// Which way a collective among workers moves its tensors (docs/cuda.md, "NCCL"):
// GPU tensors go through the DataChannel's device collectives (NCCL, on the
// tensor's stream, device to device) when every member's tensor is on a GPU of its
// own; anything else is staged through host memory. The members agree on it before
// the collective, in the exchange that also tells them whether any member cannot
// take part, so they never take different ways.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <thd/datachannel.h>
#include <thd/tensor.h>

namespace thd::worker {

using GpuId = std::array<uint8_t, 16>;  // a GPU's UUID (thd::cuda::device_uuid)

// What one member says in that exchange.
struct MemberClaim {
  int32_t refused_node = 0;  // node + 1 when this member cannot take part, else 0
  GpuId gpu{};               // the GPU its tensor offers the device path from; zeros: none
  // node + 1 when this member lacks the host memory to stage its GPU tensor: it can
  // still take the device path, and fails the collective only if they stage.
  int32_t cannot_stage_node = 0;
  // In a graph's replay, the all_reduce this member could take part in by the
  // one-exchange form (worker/graph_collective.h), as one key (fused_key): the
  // members settle on that form when every member's key is the same and not 0.
  int64_t fused = 0;
  bool operator==(const MemberClaim&) const = default;
};

// The GPU `t` offers the device path from, or nullopt when it cannot take it: on
// the CPU, not contiguous, a build without NCCL, or a reduction NCCL lacks (the
// bitwise ones; `reduce` is the collective's reduction, nullopt when it has none).
std::optional<GpuId> device_path_gpu(const Tensor& t, std::optional<ReduceOp> reduce);

// One member's row of the exchange's all_gather (5 int64) and back; the rows of
// all members are a [members, 5] int64 tensor.
inline constexpr int64_t kClaimWords = 5;
using ClaimWords = std::array<int64_t, kClaimWords>;
ClaimWords claim_words(const MemberClaim& claim);
Tensor encode_claim(const MemberClaim& claim);
std::vector<MemberClaim> decode_claims(const Tensor& rows);

enum class CollectivePath { Device, Host };
// Device when every member offers a GPU and no two offer the same one (NCCL cannot
// put two ranks of a communicator on one GPU: workers sharing a GPU stage through
// host memory instead).
CollectivePath choose_path(std::span<const MemberClaim> claims);

// For the host path: the node (+ 1) of the first member that cannot stage, else 0.
int32_t unable_to_stage(std::span<const MemberClaim> claims);

}  // namespace thd::worker
