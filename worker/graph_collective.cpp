#include "worker/graph_collective.h"

#include <algorithm>

#include "datachannel/runtime_queries.h"

namespace thd::worker {

namespace {

constexpr int64_t kStaleBit = int64_t{1} << 32;
// In a key: this member's transport asks for the rooted form. The keys' other bits
// stay below it (the sizes the flagged form takes are small).
constexpr int64_t kRootedBit = int64_t{1} << 62;

}  // namespace

TensorLayout layout_of(const Tensor& t) { return {t.device(), t.dtype(), t.numel(), t.is_contiguous()}; }

int64_t fused_key(DataChannel& group, const TensorLayout& layout, ReduceOp reduce) {
  if (!layout.device.is_cpu() || !layout.contiguous || layout.numel <= 0) return 0;
  if (!detail::flagged_all_reduce_fits(group, static_cast<size_t>(layout.numel), layout.dtype, reduce)) return 0;
  // The members' sizes, dtypes and reductions agree exactly when their keys do.
  const int64_t key = 1 + (layout.numel << 16) + (static_cast<int64_t>(layout.dtype) << 8) + static_cast<int64_t>(reduce);
  return detail::flagged_all_reduce_prefers_rooted(group) ? key | kRootedBit : key;
}

int64_t encode_word(const ReplayWord& word) {
  return static_cast<int64_t>(static_cast<uint32_t>(word.refused_node)) | (word.stale ? kStaleBit : 0);
}

ReplayWord decode_word(int64_t word) {
  return {static_cast<int32_t>(static_cast<uint32_t>(word & 0xffffffff)), (word & kStaleBit) != 0};
}

ReplayWord combine_words(std::span<const int64_t> words) {
  ReplayWord all;
  for (int64_t w : words) {
    const ReplayWord one = decode_word(w);
    all.refused_node = std::max(all.refused_node, one.refused_node);
    all.stale = all.stale || one.stale;
  }
  return all;
}

void SettledCollective::settle(std::span<const MemberClaim> claims, const TensorLayout& mine) {
  auto same = [](int64_t a, int64_t b) { return (a & ~kRootedBit) == (b & ~kRootedBit); };
  fused_ = !claims.empty() && claims.front().fused != 0 &&
           std::all_of(claims.begin(), claims.end(), [&](const MemberClaim& c) {
             return same(c.fused, claims.front().fused) && c.refused_node == 0;
           });
  // One member that asks for the rooted form is enough: every member reads the
  // same claims, so all choose alike.
  rooted_ = fused_ && std::any_of(claims.begin(), claims.end(),
                                  [](const MemberClaim& c) { return (c.fused & kRootedBit) != 0; });
  layout_ = mine;
  if (fused_) ++settlements_;
}

}  // namespace thd::worker
