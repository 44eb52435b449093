#include "worker/collective_path.h"

#include <algorithm>
#include <cstring>

#include <thd/config.h>
#include <thd/cuda.h>

#include "tensor/check.h"

namespace thd::worker {

namespace {

constexpr GpuId kNoGpu{};

}  // namespace

std::optional<GpuId> device_path_gpu(const Tensor& t, std::optional<ReduceOp> reduce) {
  if (!THD_WITH_NCCL || t.device().is_cpu() || !t.is_contiguous()) return std::nullopt;
  if (reduce && (*reduce == ReduceOp::BAnd || *reduce == ReduceOp::BOr || *reduce == ReduceOp::BXor)) {
    return std::nullopt;  // NCCL reduces with sum, prod, max, min and avg only
  }
  const GpuId id = cuda::device_uuid(t.device().index());
  // An all-zero UUID would read as "no GPU": such a member stages, which is safe.
  if (id == kNoGpu) return std::nullopt;
  return id;
}

ClaimWords claim_words(const MemberClaim& claim) {
  ClaimWords words = {claim.refused_node, 0, 0, claim.cannot_stage_node, claim.fused};
  std::memcpy(&words[1], claim.gpu.data(), claim.gpu.size());
  return words;
}

Tensor encode_claim(const MemberClaim& claim) {
  const ClaimWords words = claim_words(claim);
  return Tensor::from_vector(std::vector<int64_t>(words.begin(), words.end()), {kClaimWords});
}

std::vector<MemberClaim> decode_claims(const Tensor& rows) {
  THD_CHECK(rows.dtype() == kInt64 && rows.dim() == 2 && rows.shape()[1] == kClaimWords, ValueError, "collective",
            "the members' claims are a [members, {}] int64 tensor, not {}{}", kClaimWords, dtype_name(rows.dtype()),
            shape_str(rows.shape()));
  const std::vector<int64_t> words = rows.to_vector<int64_t>();
  std::vector<MemberClaim> claims(static_cast<size_t>(rows.shape()[0]));
  for (size_t m = 0; m < claims.size(); ++m) {
    const int64_t* row = words.data() + m * kClaimWords;
    claims[m].refused_node = static_cast<int32_t>(row[0]);
    std::memcpy(claims[m].gpu.data(), &row[1], claims[m].gpu.size());
    claims[m].cannot_stage_node = static_cast<int32_t>(row[3]);
    claims[m].fused = row[4];
  }
  return claims;
}

CollectivePath choose_path(std::span<const MemberClaim> claims) {
  if (claims.empty()) return CollectivePath::Host;
  std::vector<GpuId> gpus;
  gpus.reserve(claims.size());
  for (const MemberClaim& c : claims) {
    if (c.gpu == kNoGpu) return CollectivePath::Host;
    gpus.push_back(c.gpu);
  }
  std::sort(gpus.begin(), gpus.end());
  return std::adjacent_find(gpus.begin(), gpus.end()) == gpus.end() ? CollectivePath::Device : CollectivePath::Host;
}

int32_t unable_to_stage(std::span<const MemberClaim> claims) {
  for (const MemberClaim& c : claims) {
    if (c.cannot_stage_node > 0) return c.cannot_stage_node;
  }
  return 0;
}

}  // namespace thd::worker
