// Authentication of the ranks of a message-library world, before any message of
// the program moves: the libraries' own connections are not authenticated.
//
// Each rank publishes a fresh nonce in the channel's store (with who its process
// is, process_watch.h, so that peers on one host can watch each other at no extra
// store round trip). To each peer it then sends, as its first message, a hello:
// magic, its rank, and HMAC(token, the peer's nonce, its own). A rank without the
// job's token can neither make a proof the others accept nor accept theirs, so
// both sides refuse. This class holds the nonces and the verdicts; it moves no
// message itself (PipeTransport sends the hellos and hands over what arrives).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <thd/store.h>

#include "datachannel/net/auth.h"

namespace thd::detail::pipe {

class TokenProof {
 public:
  // Magic "thdA", the sender's rank (u32, little-endian), the HMAC.
  static constexpr size_t kHelloBytes = 8 + net::kMacBytes;

  TokenProof(int rank, int size, net::AuthToken token, net::Nonce nonce = net::random_nonce());

  // Publishes this rank's nonce and `identity` under pipe/nonce/<rank> and reads
  // every peer's: the peers' published identities, by rank (empty for this rank).
  // TimeoutError naming a peer that did not publish within `timeout`,
  // ConnectionError for a malformed nonce; `op` names the caller in both.
  std::vector<std::string> exchange(Store& store, std::chrono::milliseconds timeout, const std::string& identity,
                                    const std::string& op);
  // The nonce `peer` published (what exchange() does for each peer).
  void set_peer_nonce(int peer, const net::Nonce& nonce);

  // The first message this rank sends to `peer`.
  std::vector<uint8_t> hello_for(int peer) const;
  // Judges the first message `peer` sent: true when it proves the token; otherwise
  // the peer is refused and refusal() says why (a message that is not a hello, a
  // hello claiming another rank, a proof that does not verify).
  bool check_hello(int peer, std::span<const uint8_t> message);

  // Read for every message: a plain array lookup.
  bool proved(int peer) const noexcept { return proved_[static_cast<size_t>(peer)] != 0; }
  bool refused(int peer) const noexcept { return !refused_[static_cast<size_t>(peer)].empty(); }
  const std::string& refusal(int peer) const noexcept { return refused_[static_cast<size_t>(peer)]; }
  // Where this rank's token came from, for errors ("options", "THD_AUTH_TOKEN").
  const std::string& token_source() const noexcept { return token_.source(); }

 private:
  int rank_;
  net::AuthToken token_;
  net::Nonce nonce_;
  std::vector<net::Nonce> peer_nonces_;
  std::vector<char> proved_;  // not vector<bool>: read for every message
  std::vector<std::string> refused_;
};

}  // namespace thd::detail::pipe
