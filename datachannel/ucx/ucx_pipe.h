// The ucx backend's MessagePipe: tagged messages between the ranks of a world over
// UCX's UCP tag API (one ucp_context and one ucp_worker per pipe, one ucp_ep per
// peer). docs/backend_ucx.md says how the pipe maps onto UCX.
#pragma once

#include <thd/datachannel.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "datachannel/pipe/message_pipe.h"

namespace thd::detail::ucx {

// What the caller may set beyond DataChannelOptions. The defaults are what the
// backend uses; tests pick transports here instead of through the environment.
struct PipeSettings {
  // UCX configuration entries applied over the environment's UCX_* variables with
  // ucp_config_modify, named without the UCX_ prefix: {"TLS", "tcp"}. Empty in the
  // backend, so UCX_TLS, UCX_NET_DEVICES and the rest are the user's to set.
  std::vector<std::pair<std::string, std::string>> ucx_config;
  // How long the destructor lets its goodbyes and endpoint flushes take before it
  // drops the endpoints.
  std::chrono::milliseconds close_timeout{2000};
};

// Creates this rank's UCX objects, publishes its worker address in options.store
// ("ucx/addr/<rank>"), waits for every other rank's (options.timeout), connects
// to each peer and exchanges a greeting with it. Throws ValueError for bad options
// or settings, ConnectionError when UCX cannot start or reach a peer (with UCX's
// own text and a hint), TimeoutError naming the ranks that did not show up.
std::unique_ptr<pipe::MessagePipe> make_pipe(const DataChannelOptions& options);
std::unique_ptr<pipe::MessagePipe> make_pipe(const DataChannelOptions& options, const PipeSettings& settings);

}  // namespace thd::detail::ucx
