// How the members of an NCCL communicator meet: through the channel's Store (the
// job's authenticated rendezvous), before NCCL itself is asked to connect them.
// Meeting there first gives the errors NCCL cannot: which members never arrived
// (a TimeoutError naming them, with nothing of NCCL to clean up), and which two
// ranks would share a GPU (NCCL cannot run two ranks of a communicator on one).
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include <thd/store.h>

#include "datachannel/nccl/nccl_error.h"
#include "datachannel/net/socket.h"

namespace thd::detail::nccl {

// Where a member runs: its host and its GPU.
struct Placement {
  std::string host_id;    // NCCL_HOSTID when set (as NCCL itself), else host name and boot id
  std::string host_name;  // for messages
  std::string gpu;        // the device's PCI bus id: unique on a host whatever CUDA_VISIBLE_DEVICES says
  int device = -1;        // the CUDA device index in that process
  int device_count = 0;   // GPUs that process sees
};

// This process on CUDA device `device`.
Placement placement_of(int device, const CallSite& where);

std::string encode(const Placement& placement);
// ValueError for text encode() did not make.
Placement decode(const std::string& text, const CallSite& where);

// Member `me` of the communicator whose members are `world_ranks` (member i is
// world rank world_ranks[i]) meets the others under `prefix` in `store`: it
// publishes its placement, member 0 also a fresh ncclUniqueId, and it waits for
// every member until `deadline`. Returns the id. TimeoutError naming the members
// that did not arrive; ValueError when two members would share a GPU, naming them
// and the GPU counts (every member raises the same error).
ncclUniqueId meet(Store& store, const std::string& prefix, const std::vector<int>& world_ranks, int me,
                  const Placement& mine, net::Deadline deadline, const CallSite& where);

}  // namespace thd::detail::nccl
