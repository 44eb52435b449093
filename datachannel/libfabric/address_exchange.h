// Every rank publishes its endpoint's name (fi_getname) in the store and inserts
// every peer's into its address vector: after this a rank can send to any other
// (reliable-datagram endpoints connect on first use, inside the provider).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include <rdma/fabric.h>

#include <thd/store.h>

#include "datachannel/libfabric/endpoint.h"

namespace thd::detail::libfabric {

// The store key of a rank's address (the store is private to this channel).
std::string address_key(int rank);

// Publishes this rank's address, waits for every other rank's until `timeout`
// (TimeoutError naming the ranks missing), checks that each uses this rank's
// provider (ConnectionError naming both), and inserts them. Returns each rank's
// fi_addr_t, by rank (FI_ADDR_NOTAVAIL for this rank), and, where `names` is
// given, each peer's fi_getname bytes there (empty for this rank).
std::vector<fi_addr_t> exchange_addresses(Store& store, Endpoint& endpoint, int rank, int world_size,
                                          std::chrono::milliseconds timeout,
                                          std::vector<std::vector<uint8_t>>* names = nullptr);

}  // namespace thd::detail::libfabric
