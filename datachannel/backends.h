// What the rest of thd asks of the backends, through the registry (registry.cpp).
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include <thd/store.h>

#include "datachannel/device_collectives.h"
#include "datachannel/net/auth.h"
#include "datachannel/transport.h"

namespace thd::detail {

// The library this build runs collectives on device tensors with, for a channel
// whose backend has none of its own: that of the backend declared with
// DEVICE_COLLECTIVES (nccl, when built with THD_WITH_NCCL), its module loaded;
// nullptr when there is none.
std::unique_ptr<DeviceCollectives> make_device_collectives(int world_rank, int world_size);

}  // namespace thd::detail
