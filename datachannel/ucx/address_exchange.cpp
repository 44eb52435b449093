#include "datachannel/ucx/address_exchange.h"

#include <string>

#include "datachannel/check.h"

namespace thd::detail::ucx {

namespace {

constexpr const char* kOp = "ucx backend set-up";

std::string address_key(int rank) { return "ucx/addr/" + std::to_string(rank); }

}  // namespace

std::vector<std::vector<uint8_t>> exchange_addresses(Store& store, int rank, int world_size,
                                                     const std::vector<uint8_t>& own,
                                                     std::chrono::milliseconds timeout) {
  std::vector<std::vector<uint8_t>> addresses(static_cast<size_t>(world_size));
  addresses[static_cast<size_t>(rank)] = own;
  if (world_size == 1) return addresses;
  store.set(address_key(rank), own);

  std::vector<std::string> keys;
  for (int peer = 0; peer < world_size; ++peer) {
    if (peer != rank) keys.push_back(address_key(peer));
  }
  try {
    store.wait(keys, timeout);
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (int peer = 0; peer < world_size; ++peer) {
      if (peer != rank && !store.check({address_key(peer)})) missing.push_back(peer);
    }
    THD_THROW_AT(TimeoutError, kOp, rank, missing.size() == 1 ? missing.front() : -1,
                 "rank {} waited {} ms for the UCX worker address of rank{} {}: {} not running, or using another "
                 "store?",
                 rank, timeout.count(), missing.size() == 1 ? "" : "s", fmt::join(missing, ", "),
                 missing.size() == 1 ? "is it" : "are they");
  }
  for (int peer = 0; peer < world_size; ++peer) {
    if (peer == rank) continue;
    std::vector<uint8_t> address = store.get(address_key(peer), timeout);
    THD_CHECK(!address.empty(), ConnectionError, kOp, "rank {}: rank {} published an empty UCX worker address", rank,
              peer);
    addresses[static_cast<size_t>(peer)] = std::move(address);
  }
  return addresses;
}

}  // namespace thd::detail::ucx
