// What the runtime above asks a DataChannel when it plans a collective on its
// workers' tensors, and the collective only the runtime runs, through the channel
// itself rather than its internal state (datachannel/group_state.h stays the
// datachannel's own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <vector>

#include <thd/datachannel.h>

namespace thd::detail {

// Whether `channel`'s device collectives can take a collective on CUDA device
// `device` now (DeviceCollectives::usable_on); false when the build has none.
bool device_collectives_usable(DataChannel& channel, int device);

// The PeerLost error of `rank` (in the channel's group) once the channel's
// transport has lost it, nullptr while it is healthy: how a listener on any
// source (whose receive waits on for the other senders) hears of a lost sender.
std::exception_ptr peer_lost_error(DataChannel& channel, int rank);

// An all_reduce whose members each put a word beside their data, in the same
// messages: how a runtime tells the other members "I cannot take part" (a poisoned
// input, a refusal) without an exchange of its own before the collective. Every
// member sends [word | data] to every other member (one message latency:
// collectives/direct_all_reduce.cpp) and reduces locally in the order the
// DataChannel's all_reduce reduces buffers of that size, so the result is the same
// bits as all_reduce's.
//
// Whether flagged_all_reduce takes `count` elements of `dtype` reduced with `op` on
// `channel`: a group of two or more whose all_reduce would run recursive doubling
// on them (the size and group size are within its range, no backend collectives
// of its own, no float32 widening), whose order the flagged form follows. Every
// member of a group answers alike for the same arguments.
bool flagged_all_reduce_fits(DataChannel& channel, size_t count, DType dtype, ReduceOp op);

// The flagged all_reduce's two forms. Direct: [word | data] from every member to
// every other one, n (n - 1) messages in one message latency. Rooted: every member
// to group rank 0, which reduces and sends [every word | result] back, 2 (n - 1)
// messages in two latencies: the better trade where messages cost CPU that the
// members' work waits for (more ranks on the host than cores). Both give the same
// bits. Whether this member's transport asks for the rooted form of a group of
// `channel`'s size; members that may answer differently must agree first (the
// runtime settles the form in its claim exchange).
bool flagged_all_reduce_prefers_rooted(DataChannel& channel);

// Every member calls it with the same count, dtype, op and form (only where
// flagged_all_reduce_fits says so; ValueError otherwise) and a CPU contiguous
// tensor. Returns every member's word in group-rank order; when all are 0,
// `tensor` holds the reduction over every member's tensor, else it is unchanged.
// Within options.timeout; PeerLost when a member is lost. Members that call it in
// different forms fail with the DataChannel's mismatch error.
std::vector<int64_t> flagged_all_reduce(DataChannel& channel, Tensor& tensor, ReduceOp op, int64_t word,
                                        const CollectiveOptions& options, bool rooted = false);

}  // namespace thd::detail
