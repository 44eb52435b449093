// The protocol version inside a worker_batch input (worker_script.h). A recorded
// or crafted input holds whole protocol Messages; once the protocol's version
// moves on, the worker refuses each of them at its version check, before the
// code the input was made for. These find such Messages and restamp them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace thd::fuzz {

// One version field of an input that is not this build's protocol::kVersion: of a
// record's Message that passes the worker's FlatBuffers verification, or of the
// Hello such a Message carries. (A record that does not verify is refused before
// its version is read: malformed on purpose, it stays as it is.)
struct StaleVersion {
  size_t record = 0;  // its index among the input's records
  bool hello = false;
  uint32_t version = 0;
  std::string describe() const;
};

std::vector<StaleVersion> stale_versions(std::span<const uint8_t> input);

// The input with every stale version set to protocol::kVersion (the records
// re-encoded as the worker reads them); `restamped` counts the fields changed.
std::vector<uint8_t> restamp_versions(std::span<const uint8_t> input, size_t* restamped = nullptr);

}  // namespace thd::fuzz
