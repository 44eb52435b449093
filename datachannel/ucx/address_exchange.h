// The worker addresses of a world, swapped through the channel's store: each rank
// sets "ucx/addr/<rank>" and reads everyone else's.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include <thd/store.h>

namespace thd::detail::ucx {

// Publishes `own` as `rank`'s address and returns every rank's, indexed by rank
// (`own` at `rank`). Waits until `timeout` for the others; then TimeoutError
// naming the ranks whose address never appeared.
std::vector<std::vector<uint8_t>> exchange_addresses(Store& store, int rank, int world_size,
                                                     const std::vector<uint8_t>& own,
                                                     std::chrono::milliseconds timeout);

}  // namespace thd::detail::ucx
