// The UCX objects one pipe owns, each in a smart pointer that releases it the
// UCX way, and their creation with UCX's errors turned into thd errors (UCX's own
// text plus a hint on what to set).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <ucp/api/ucp.h>

#include "datachannel/ucx/ucx_pipe.h"

namespace thd::detail::ucx {

struct ConfigDeleter {
  void operator()(ucp_config_t* config) const noexcept { ucp_config_release(config); }
};
using UniqueConfig = std::unique_ptr<ucp_config_t, ConfigDeleter>;

struct ContextDeleter {
  void operator()(ucp_context_h context) const noexcept { ucp_cleanup(context); }
};
using UniqueContext = std::unique_ptr<std::remove_pointer_t<ucp_context_h>, ContextDeleter>;

// Destroying a worker also releases the endpoints still open on it.
struct WorkerDeleter {
  void operator()(ucp_worker_h worker) const noexcept { ucp_worker_destroy(worker); }
};
using UniqueWorker = std::unique_ptr<std::remove_pointer_t<ucp_worker_h>, WorkerDeleter>;

// What the pipe asks of the context: room for its own state in every UCX request.
struct ContextShape {
  size_t request_size = 0;
  ucp_request_init_callback_t request_init = nullptr;
  int world_size = 1;
};

// UCX's configuration from the environment (UCX_*), then settings.ucx_config over
// it, then the pipe's one default (see shm_error_handling_default in the .cpp).
UniqueConfig read_config(const PipeSettings& settings, int rank);
// A context with the TAG and WAKEUP features.
UniqueContext create_context(ucp_config_t* config, const ContextShape& shape, const PipeSettings& settings, int rank);
// A worker for calls from one thread at a time (any thread: PipeTransport's lock
// serializes them).
UniqueWorker create_worker(ucp_context_h context, int rank);
// The worker's address as bytes, for the store.
std::vector<uint8_t> worker_address(ucp_worker_h worker, int rank);

// The value UCX will use for a setting, for hints: the override in settings, else
// UCX_<name> from the environment, else `unset`.
std::string effective_setting(const PipeSettings& settings, const std::string& name, const std::string& unset);

}  // namespace thd::detail::ucx
