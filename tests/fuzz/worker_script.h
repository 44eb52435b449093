// The fuzz input of the worker target: what a master and a peer node send one
// worker node over a whole session, as records (docs in README.md, "worker_batch"):
//
//   record := kind[1] length[2, LE] payload[length]
//
//   kind 0  Message       a protocol Message (FlatBuffer) the master sends on the
//                         command tag, as protocol::send_message sends it: one
//                         message of bytes
//   kind 1  CommandFrame  dtype[1] bytes: one message of any kind on the command
//                         tag (a tensor's where bytes belong)
//   kind 2  Upload        dtype[1] bytes: the next frame on the upload tag (the
//                         bytes of an Upload's tensor, announced as dtype)
//   kind 3  PeerMessage   a Message from the other node (a to_node status, an
//                         EventNotice), sent like kind 0
//   kind 4  PeerFrame     dtype[1] bytes: one raw frame from the other node (a
//                         to_node payload, a collective's message)
//
// dtype is a thd::DType code, or 0xff for raw bytes. Kinds past 4 read as 0.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace thd::fuzz {

enum class RecordKind : uint8_t { Message = 0, CommandFrame = 1, Upload = 2, PeerMessage = 3, PeerFrame = 4 };

inline constexpr uint8_t kRawDType = 0xff;
inline constexpr size_t kMaxRecordBytes = 0xffff;

struct Record {
  RecordKind kind = RecordKind::Message;
  uint8_t dtype = kRawDType;  // frames only
  std::vector<uint8_t> bytes;
};

std::vector<Record> decode_records(std::span<const uint8_t> input);
// ValueError for a record longer than kMaxRecordBytes.
std::vector<uint8_t> encode_records(const std::vector<Record>& records);

}  // namespace thd::fuzz
