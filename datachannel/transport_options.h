// The checks every backend's factory makes of DataChannelOptions before it opens
// anything, with the backend's own name in the errors (factories are also called
// directly, by tests, without DataChannel::create's checks in front of them).
#pragma once

#include <string_view>

#include <thd/datachannel.h>

namespace thd::detail {

// ValueError naming `op` for a missing store (`store_use` says what the backend
// exchanges through it), a world size below 1, a rank outside it, or a timeout
// that is not positive.
void check_transport_options(const DataChannelOptions& options, std::string_view op, std::string_view store_use);

}  // namespace thd::detail
