// The addresses of a world's ranks, swapped through the channel's store: each rank
// sets "<backend>/addr/<rank>" and reads everyone else's. What an address is (a
// UCX worker address, a libfabric endpoint name) is the backend's business.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

#include <thd/store.h>

namespace thd::detail::pipe {

// Publishes `own` as `rank`'s address and returns every rank's, by rank (`own` at
// `rank`). Waits until `timeout` for the others: then TimeoutError naming the ranks
// whose address never appeared; ConnectionError for an empty one.
std::vector<std::vector<uint8_t>> exchange_addresses(Store& store, std::string_view backend, int rank,
                                                     int world_size, const std::vector<uint8_t>& own,
                                                     std::chrono::milliseconds timeout);

}  // namespace thd::detail::pipe
