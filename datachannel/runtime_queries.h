// What the runtime above asks a DataChannel when it plans a collective on its
// workers' tensors, through the channel itself rather than its internal state
// (datachannel/group_state.h stays the datachannel's own).
#pragma once

#include <exception>

#include <thd/datachannel.h>

namespace thd::detail {

// Whether `channel`'s device collectives can take a collective on CUDA device
// `device` now (DeviceCollectives::usable_on); false when the build has none.
bool device_collectives_usable(DataChannel& channel, int device);

// The PeerLost error of `rank` (in the channel's group) once the channel's
// transport has lost it, nullptr while it is healthy: how a listener on any
// source (whose receive waits on for the other senders) hears of a lost sender.
std::exception_ptr peer_lost_error(DataChannel& channel, int rank);

}  // namespace thd::detail
