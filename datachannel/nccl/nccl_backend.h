// The nccl backend (DataChannel::create("nccl", ...)) and the way a channel of any
// other backend reaches NCCL for its CUDA tensors.
//
// The nccl backend is two things under one name, as torch's "cpu:gloo,cuda:nccl":
// its host transport is the tcp backend's (every message of the channel's own,
// CPU tensors, the runtime's commands, the conformance suite), and its CUDA
// tensors go through NCCL (collectives_of). It therefore works in a process
// without a GPU, such as a master that only commands workers.
#pragma once

#include <memory>

#include <thd/datachannel.h>

#include "datachannel/nccl/nccl_collectives.h"
#include "datachannel/transport.h"

namespace thd::detail::nccl {

// The nccl backend's transport: the tcp backend's, with the channel's
// NcclCollectives beside it.
std::shared_ptr<Transport> make_transport(const DataChannelOptions& options);

// The NCCL collectives of a channel of the nccl backend (`g` its world group or
// any group made from it); nullptr for a channel of another backend.
NcclCollectives* collectives_of(const GroupState& g);

// NCCL collectives for a channel of any backend (tcp, ucx, ...): the runtime's hook
// for CUDA tensors on a channel that is not nccl's (a channel of the nccl backend
// has its own: collectives_of). One per channel: `channel` is its world group or
// any group made from it, and every group of that channel may be passed to its
// operations. Keep it no longer than the channel. The first device operation on a
// group makes that group's communicator, through the channel's store.
std::unique_ptr<NcclCollectives> make_collectives(DataChannel& channel);

}  // namespace thd::detail::nccl
