// The checks every backend's factory makes of DataChannelOptions before it opens
// anything, with the backend's own name in the errors (factories are also called
// directly, by tests, without DataChannel::create's checks in front of them).
#pragma once

#include <cstddef>
#include <string_view>

#include <thd/datachannel.h>

#include "datachannel/net/auth.h"

namespace thd::detail {

// ValueError naming `op` for a missing store (`store_use` says what the backend
// exchanges through it), a world size below 1, a rank outside it, or a timeout
// that is not positive.
void check_transport_options(const DataChannelOptions& options, std::string_view op, std::string_view store_use);

// The bytes of messages that arrived before their receive a rank holds per peer:
// THD_MAX_UNEXPECTED_BYTES when set (ValueError naming `op` when it is not a whole
// number of bytes, at least 1 MiB), else the backend's `default_bytes`. What a
// backend does past it is its own (docs/datachannel.md, "Unexpected messages").
size_t max_unexpected_bytes(std::string_view op, size_t default_bytes, const net::EnvLookup& env = net::process_env);

}  // namespace thd::detail
