// The libfabric backend's MessagePipe factory (docs/backend_libfabric.md).
#pragma once

#include <memory>
#include <string>

#include <thd/datachannel.h>

#include "datachannel/pipe/message_pipe.h"

namespace thd::detail::libfabric {

// Choices the DataChannel options do not carry.
struct PipeSettings {
  // The libfabric provider ("tcp", "shm", "tcp;ofi_rxm"); empty: libfabric's first
  // choice among those FI_PROVIDER allows (libfabric reads FI_PROVIDER itself).
  std::string provider;
  // Register every buffer with the domain even where the provider does not ask
  // for it (FI_MR_LOCAL), so the registration path runs on tcp and shm too.
  bool always_register_memory = false;
};

// Checks the options (store required, rank in range, timeout positive:
// ValueError), opens this rank's endpoint (ConnectionError with libfabric's text
// and a FI_PROVIDER hint when no provider is usable), publishes its address in
// options.store, waits for every other rank's (options.timeout: TimeoutError
// naming the ranks missing) and inserts them.
std::unique_ptr<pipe::MessagePipe> make_pipe(const DataChannelOptions& options);
std::unique_ptr<pipe::MessagePipe> make_pipe(const DataChannelOptions& options, const PipeSettings& settings);

}  // namespace thd::detail::libfabric
