// Connections that do not prove the job's token, made to a thd listener: each must
// be refused (closed) before anything it sends is acted on. The tests that use
// these prove the "acted on" part themselves: a store's keys, a channel's
// messages, a pool's sessions are unchanged afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace thd::test {

enum class Attack {
  Garbage,      // bytes that are not a handshake, then the request
  NoHandshake,  // the request straight away, as if no handshake were needed
  WrongToken,   // a full handshake with another token, then the request
  Replay,       // a recorded handshake of a real client (and what it sent next) on a new connection
};

std::string attack_name(Attack attack);
inline const std::vector<Attack> kAttacks = {Attack::Garbage, Attack::NoHandshake, Attack::WrongToken, Attack::Replay};

// Mounts `attack` on 127.0.0.1:port. `request` is what the attacker wants done
// (a store request, a DataChannel Hello and frame); `recorded` is what a real
// client sent on its connection, starting with its handshake (Replay only).
// Success: the listener closed the connection (Replay and WrongToken: after
// refusing the proof with a nonzero status) within a few seconds.
::testing::AssertionResult refused(uint16_t port, Attack attack, const std::vector<uint8_t>& request,
                                   const std::vector<uint8_t>& recorded = {});

}  // namespace thd::test
