#include "datachannel/pipe/token_proof.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "datachannel/check.h"

namespace thd::detail::pipe {

namespace {
constexpr char kHelloMagic[4] = {'t', 'h', 'd', 'A'};
}  // namespace

TokenProof::TokenProof(int rank, int size, net::AuthToken token, net::Nonce nonce)
    : rank_(rank),
      token_(std::move(token)),
      nonce_(nonce),
      peer_nonces_(static_cast<size_t>(size)),
      proved_(static_cast<size_t>(size), 0),
      refused_(static_cast<size_t>(size)) {}

std::vector<std::string> TokenProof::exchange(Store& store, std::chrono::milliseconds timeout,
                                              const std::string& identity, const std::string& op) {
  std::vector<uint8_t> published(nonce_.begin(), nonce_.end());
  published.insert(published.end(), identity.begin(), identity.end());
  store.set(fmt::format("pipe/nonce/{}", rank_), published);
  const int size = static_cast<int>(peer_nonces_.size());
  std::vector<std::string> identities(static_cast<size_t>(size));
  for (int p = 0; p < size; ++p) {
    if (p == rank_) continue;
    std::vector<uint8_t> theirs;
    try {
      theirs = store.get(fmt::format("pipe/nonce/{}", p), timeout);
    } catch (const TimeoutError&) {
      THD_THROW_AT(TimeoutError, op, rank_, p, "rank {} did not join within {} ms", p, timeout.count());
    }
    THD_CHECK(theirs.size() >= net::kNonceBytes, ConnectionError, op, "rank {} published a malformed nonce", p);
    net::Nonce nonce;
    std::copy_n(theirs.begin(), net::kNonceBytes, nonce.begin());
    set_peer_nonce(p, nonce);
    identities[static_cast<size_t>(p)].assign(theirs.begin() + net::kNonceBytes, theirs.end());
  }
  return identities;
}

void TokenProof::set_peer_nonce(int peer, const net::Nonce& nonce) { peer_nonces_[static_cast<size_t>(peer)] = nonce; }

std::vector<uint8_t> TokenProof::hello_for(int peer) const {
  const net::Mac proof = net::client_proof(token_, peer_nonces_[static_cast<size_t>(peer)], nonce_);
  std::vector<uint8_t> hello(kHelloBytes);
  std::memcpy(hello.data(), kHelloMagic, 4);
  const auto r = static_cast<uint32_t>(rank_);
  for (int i = 0; i < 4; ++i) hello[4 + static_cast<size_t>(i)] = static_cast<uint8_t>(r >> (8 * i));
  std::memcpy(hello.data() + 8, proof.data(), proof.size());
  return hello;
}

bool TokenProof::check_hello(int peer, std::span<const uint8_t> message) {
  const auto i = static_cast<size_t>(peer);
  const uint8_t* b = message.data();
  uint32_t claimed = 0;
  if (message.size() == kHelloBytes) {
    for (int k = 0; k < 4; ++k) claimed |= static_cast<uint32_t>(b[4 + k]) << (8 * k);
  }
  if (message.size() != kHelloBytes || std::memcmp(b, kHelloMagic, 4) != 0) {
    refused_[i] = fmt::format("rank {} sent a {}-byte message before proving the token", peer, message.size());
  } else if (claimed != static_cast<uint32_t>(peer)) {
    refused_[i] = fmt::format("rank {} sent a token proof claiming to be rank {}", peer, claimed);
  } else {
    const net::Mac expected = net::client_proof(token_, nonce_, peer_nonces_[i]);
    if (CRYPTO_memcmp(b + 8, expected.data(), expected.size()) == 0) {
      proved_[i] = 1;
      return true;
    }
    refused_[i] = fmt::format("rank {} does not hold this job's token (its proof did not verify)", peer);
  }
  return false;
}

}  // namespace thd::detail::pipe
