// The TCPStore wire format, shared by the client and the server so the two cannot
// drift apart. After the auth handshake (datachannel/net/auth.h) every message in
// either direction is one frame:
//
//   frame := length[4, LE] body          length = bytes in body, 1..kMaxMessageBytes
//
//   client -> server  request body := command[1] fields
//     Set        key value
//     Get        timeout_ms[8] key
//     Add        key delta[8, signed]
//     CompareSet key expected desired
//     Wait       timeout_ms[8] count[4] key*count
//     Check      count[4] key*count
//     DeleteKey  key
//     NumKeys    (none)
//     Join       (none)          counts this client for the server's wait_for_workers
//   where key, value, expected, desired := length[4, LE] bytes, integers little-endian.
//
//   server -> client  reply body := status[1] fields
//     Ok       Set, Wait, Join: (none)   Get, CompareSet: value   Add, NumKeys: int[8]
//              Check, DeleteKey: bool[1]
//     Timeout  count[4] key*count        the keys still missing (Get, Wait)
//     Error    message                   e.g. add on a value that is not an integer
//
// A client sends one request and reads its reply before the next. The server
// answers each connection's requests in order; Get and Wait are parked in the
// server until their keys are set or timeout_ms passes. Anything that does not
// decode exactly (unknown command, short or trailing bytes, length 0 or over the
// limit) makes the server drop that connection.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace thd::detail::store_wire {

using Bytes = std::vector<uint8_t>;

inline constexpr size_t kLengthBytes = 4;
// The largest body either side accepts: a bound on what one peer can make the
// other buffer.
inline constexpr uint32_t kMaxMessageBytes = 64u << 20;

enum class Command : uint8_t {
  Set = 1,
  Get = 2,
  Add = 3,
  CompareSet = 4,
  Wait = 5,
  Check = 6,
  DeleteKey = 7,
  NumKeys = 8,
  Join = 9,
};

enum class Status : uint8_t { Ok = 0, Timeout = 1, Error = 2 };

struct Request {
  Command command = Command::NumKeys;
  std::string key;                // Set Get Add CompareSet DeleteKey
  Bytes value;                    // Set: the value; CompareSet: desired
  Bytes expected;                 // CompareSet
  int64_t delta = 0;              // Add
  uint64_t timeout_ms = 0;        // Get Wait: how long the server may park it
  std::vector<std::string> keys;  // Wait Check
};

struct Reply {
  Status status = Status::Ok;
  Bytes value;                    // Ok: Get CompareSet
  int64_t integer = 0;            // Ok: Add NumKeys; Check DeleteKey as 0/1
  std::vector<std::string> keys;  // Timeout: the keys still missing
  std::string message;            // Error
};

std::string_view command_name(Command command);

// A whole frame, length prefix included. The body may exceed kMaxMessageBytes;
// the sender checks before sending.
Bytes encode_request(const Request& request);
Bytes encode_reply(Command command, const Reply& reply);

// Decode one body (without its length prefix). False, with the reason in *why,
// for anything that is not exactly one well-formed message.
bool decode_request(std::span<const uint8_t> body, Request* out, std::string* why);
bool decode_reply(Command command, std::span<const uint8_t> body, Reply* out, std::string* why);

// The body length announced by a frame's 4-byte prefix.
uint32_t decode_length(const uint8_t* prefix);

}  // namespace thd::detail::store_wire
