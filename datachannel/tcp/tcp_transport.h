// The tcp backend: the embedded default (docs/datachannel.md, "tcp backend").
#pragma once

#include <memory>

#include <thd/datachannel.h>

#include "datachannel/transport.h"

namespace thd::detail::tcp {

// Connects this rank to every other (full mesh, at init) through the addresses
// published in options.store, authenticating every connection with the token.
std::shared_ptr<Transport> make_transport(const DataChannelOptions& options);

}  // namespace thd::detail::tcp
