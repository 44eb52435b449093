// A master-issued all_reduce inside a graph (docs/graphs.md, "Collectives"): what
// the members settle about it once, so that its later replays pay one exchange
// instead of two.
//
// Eagerly, a collective is two exchanges among its members: the claims
// (worker/collective_path.h: whether a member cannot take part, the way the
// tensors go), then the collective. The way depends only on the members' tensors'
// devices, dtypes and sizes and on the group, which a graph fixes; whether a member
// cannot take part changes from replay to replay. So a replay's first run of the
// collective makes the full claim exchange, in which each member also offers a key
// for the one-exchange form (a CPU contiguous tensor the flagged all_reduce takes,
// datachannel/runtime_queries.h); when every member offers the same key, they
// settle on that form. Later replays then send each member's word (it cannot take
// part, or its tensor is no longer the one settled with) beside its data, in the
// collective's own messages. A word that says a member's tensor changed makes every
// member drop the settlement and run the full exchange in that same replay.
#pragma once

#include <cstdint>
#include <span>

#include <thd/datachannel.h>
#include <thd/tensor.h>

#include "worker/collective_path.h"

namespace thd::worker {

// What of a member's tensor the way of a collective depends on.
struct TensorLayout {
  Device device = Device::cpu();
  DType dtype = kFloat32;
  int64_t numel = 0;
  bool contiguous = true;
  bool operator==(const TensorLayout&) const = default;
};
TensorLayout layout_of(const Tensor& t);

// The key this member offers (MemberClaim::fused) for an all_reduce of a tensor
// laid out as `layout` with `reduce` on `group`: 0 when the one-exchange form
// cannot take it (on a GPU, strided, or not what the flagged all_reduce takes).
// Keys that differ only in the member's preferred form still settle together.
int64_t fused_key(DataChannel& group, const TensorLayout& layout, ReduceOp reduce);

// A member's word beside its data in the one-exchange form.
struct ReplayWord {
  int32_t refused_node = 0;  // node + 1 when this member cannot take part
  bool stale = false;        // its tensor is no longer laid out as settled
  bool operator==(const ReplayWord&) const = default;
};
int64_t encode_word(const ReplayWord& word);
ReplayWord decode_word(int64_t word);
// Over every member's word: the highest refused node (+ 1; 0 for none), as the
// claim exchange reports, and whether any member's tensor changed.
ReplayWord combine_words(std::span<const int64_t> words);

class SettledCollective {
 public:
  // After a full claim exchange in which no member refused: on the one-exchange
  // form when every member offered the same non-zero key; this member's tensor
  // was laid out as `mine`. Every member sees the same claims, so all settle alike.
  void settle(std::span<const MemberClaim> claims, const TensorLayout& mine);
  // Back to the full exchange (every member drops it in the same replay).
  void unsettle() { fused_ = false; }
  bool fused() const { return fused_; }
  // In the flagged all_reduce's rooted form (datachannel/runtime_queries.h): some
  // member's host has more ranks than cores.
  bool rooted() const { return rooted_; }
  const TensorLayout& layout() const { return layout_; }
  // How many full exchanges settled it on the one-exchange form.
  uint64_t settlements() const { return settlements_; }

 private:
  bool fused_ = false;
  bool rooted_ = false;
  TensorLayout layout_;
  uint64_t settlements_ = 0;
};

}  // namespace thd::worker
