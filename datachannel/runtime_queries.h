// What the runtime above asks a DataChannel when it plans a collective on its
// workers' tensors, through the channel itself rather than its internal state
// (datachannel/group_state.h stays the datachannel's own).
#pragma once

#include <thd/datachannel.h>

namespace thd::detail {

// Whether `channel`'s device collectives can take a collective on CUDA device
// `device` now (DeviceCollectives::usable_on); false when the build has none.
bool device_collectives_usable(DataChannel& channel, int device);

}  // namespace thd::detail
