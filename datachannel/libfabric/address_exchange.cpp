#include "datachannel/libfabric/address_exchange.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "datachannel/check.h"
#include "datachannel/libfabric/fi_error.h"
#include "datachannel/pipe/address_book.h"

namespace thd::detail::libfabric {

namespace {

// A published address: the provider's name, a newline, then fi_getname's bytes.
// The name lets a rank refuse a peer that chose another provider (FI_PROVIDER set
// differently across ranks) with an error that says so, instead of an address
// vector insert that fails or, worse, succeeds with a foreign address.
std::vector<uint8_t> encode(std::string_view provider, const std::vector<uint8_t>& name) {
  std::vector<uint8_t> value(provider.begin(), provider.end());
  value.push_back('\n');
  value.insert(value.end(), name.begin(), name.end());
  return value;
}

struct Published {
  std::string provider;
  std::vector<uint8_t> name;
};

Published decode(const std::vector<uint8_t>& value, int rank, int peer) {
  const auto newline = std::find(value.begin(), value.end(), uint8_t{'\n'});
  if (newline == value.end() || newline + 1 == value.end()) {
    THD_THROW_AT(ConnectionError, kOp, rank, peer,
                 "the store's {} holds {} bytes that are not a libfabric address: is the store namespace shared "
                 "with something else?",
                 address_key(peer), value.size());
  }
  return {std::string(value.begin(), newline), std::vector<uint8_t>(newline + 1, value.end())};
}

}  // namespace

std::string address_key(int rank) { return fmt::format("libfabric/addr/{}", rank); }

std::vector<fi_addr_t> exchange_addresses(Store& store, Endpoint& endpoint, int rank, int world_size,
                                          std::chrono::milliseconds timeout,
                                          std::vector<std::vector<uint8_t>>* names) {
  const auto published = pipe::exchange_addresses(store, "libfabric", rank, world_size,
                                                  encode(endpoint.provider(), endpoint.name()), timeout);
  std::vector<fi_addr_t> addrs(static_cast<size_t>(world_size), FI_ADDR_NOTAVAIL);
  if (names != nullptr) names->assign(static_cast<size_t>(world_size), {});
  for (int peer = 0; peer < world_size; ++peer) {
    if (peer == rank) continue;
    const Published p = decode(published[static_cast<size_t>(peer)], rank, peer);
    if (p.provider != endpoint.provider()) {
      THD_THROW_AT(ConnectionError, kOp, rank, peer,
                   "rank {} uses libfabric provider '{}' but rank {} uses '{}': set FI_PROVIDER to the same provider "
                   "on every rank",
                   peer, p.provider, rank, endpoint.provider());
    }
    fi_addr_t addr = FI_ADDR_NOTAVAIL;
    const int inserted = fi_av_insert(endpoint.av(), p.name.data(), 1, &addr, 0, nullptr);
    if (inserted != 1) {
      THD_THROW_AT(ConnectionError, kOp, rank, peer,
                   "libfabric provider '{}' refused the address of rank {} (fi_av_insert: {})", endpoint.provider(),
                   peer, inserted < 0 ? fi_error_text(inserted) : std::string("not inserted"));
    }
    addrs[static_cast<size_t>(peer)] = addr;
    if (names != nullptr) (*names)[static_cast<size_t>(peer)] = p.name;
  }
  return addrs;
}

}  // namespace thd::detail::libfabric
