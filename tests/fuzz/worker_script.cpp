#include "worker_script.h"

#include <cstring>

#include "byte_reader.h"
#include "tensor/check.h"

namespace thd::fuzz {

namespace {

bool is_frame(RecordKind kind) {
  return kind == RecordKind::CommandFrame || kind == RecordKind::Upload || kind == RecordKind::PeerFrame;
}

}  // namespace

std::vector<Record> decode_records(std::span<const uint8_t> input) {
  ByteReader in(input);
  std::vector<Record> out;
  while (!in.empty()) {
    Record r;
    const uint8_t kind = in.u8();
    r.kind = kind <= static_cast<uint8_t>(RecordKind::PeerFrame) ? static_cast<RecordKind>(kind) : RecordKind::Message;
    auto payload = in.take(in.u16());
    if (is_frame(r.kind) && !payload.empty()) {
      r.dtype = payload[0];
      payload = payload.subspan(1);
    }
    r.bytes.assign(payload.begin(), payload.end());
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<uint8_t> encode_records(const std::vector<Record>& records) {
  std::vector<uint8_t> out;
  for (const Record& r : records) {
    const size_t n = r.bytes.size() + (is_frame(r.kind) ? 1 : 0);
    if (n > kMaxRecordBytes) {
      THD_THROW(ValueError, "encode_records", "a record of {} bytes is longer than the format's {}", n,
                kMaxRecordBytes);
    }
    out.push_back(static_cast<uint8_t>(r.kind));
    out.push_back(static_cast<uint8_t>(n));
    out.push_back(static_cast<uint8_t>(n >> 8));
    if (is_frame(r.kind)) out.push_back(r.dtype);
    out.insert(out.end(), r.bytes.begin(), r.bytes.end());
  }
  return out;
}

}  // namespace thd::fuzz
