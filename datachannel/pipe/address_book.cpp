#include "datachannel/pipe/address_book.h"

#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "datachannel/check.h"

namespace thd::detail::pipe {

std::vector<std::vector<uint8_t>> exchange_addresses(Store& store, std::string_view backend, int rank,
                                                     int world_size, const std::vector<uint8_t>& own,
                                                     std::chrono::milliseconds timeout) {
  const std::string op = fmt::format("{} backend set-up", backend);
  auto key = [&](int r) { return fmt::format("{}/addr/{}", backend, r); };
  std::vector<std::vector<uint8_t>> addresses(static_cast<size_t>(world_size));
  addresses[static_cast<size_t>(rank)] = own;
  if (world_size == 1) return addresses;
  store.set(key(rank), own);

  std::vector<std::string> keys;
  for (int peer = 0; peer < world_size; ++peer) {
    if (peer != rank) keys.push_back(key(peer));
  }
  try {
    store.wait(keys, timeout);
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (int peer = 0; peer < world_size; ++peer) {
      if (peer != rank && !store.check({key(peer)})) missing.push_back(peer);
    }
    if (missing.empty()) throw;  // they came just after the wait gave up: the store's own error
    THD_THROW_AT(TimeoutError, op, rank, missing.size() == 1 ? missing.front() : -1,
                 "rank {} waited {} ms for the {} address of rank{} {}: {} not running, or using another store or "
                 "backend?",
                 rank, timeout.count(), backend, missing.size() == 1 ? "" : "s", fmt::join(missing, ", "),
                 missing.size() == 1 ? "is it" : "are they");
  }
  for (int peer = 0; peer < world_size; ++peer) {
    if (peer == rank) continue;
    std::vector<uint8_t> address = store.get(key(peer), timeout);
    THD_CHECK(!address.empty(), ConnectionError, op, "rank {}: rank {} published an empty {} address", rank, peer,
              backend);
    addresses[static_cast<size_t>(peer)] = std::move(address);
  }
  return addresses;
}

}  // namespace thd::detail::pipe
