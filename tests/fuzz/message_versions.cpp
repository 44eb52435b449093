#include "message_versions.h"

#include <fmt/format.h>

#include "protocol/codec.h"
#include "tensor/check.h"
#include "worker_script.h"

namespace thd::fuzz {

namespace {

namespace fb = protocol::fb;

// The version fields of `bytes` when they verify as a Message the way the worker
// verifies one (protocol::verify_message, before its version check).
struct Fields {
  flatbuffers::Table* message = nullptr;
  flatbuffers::Table* hello = nullptr;  // when the body is a Hello
};

Fields fields_of(std::vector<uint8_t>& bytes) {
  if (bytes.size() < sizeof(flatbuffers::uoffset_t) || bytes.size() > protocol::kMaxMessageBytes) return {};
  flatbuffers::Verifier::Options options;
  options.max_depth = protocol::kMaxVerifierDepth;
  options.max_tables = protocol::kMaxVerifierTables;
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), options);
  if (!fb::VerifyMessageBuffer(verifier)) return {};
  auto* m = const_cast<fb::Message*>(fb::GetMessage(bytes.data()));
  Fields f;
  f.message = reinterpret_cast<flatbuffers::Table*>(m);
  if (m->body_type() == fb::Body::Hello && m->body() != nullptr) {
    f.hello = reinterpret_cast<flatbuffers::Table*>(const_cast<void*>(m->body()));
  }
  return f;
}

bool carries_messages(RecordKind kind) { return kind == RecordKind::Message || kind == RecordKind::PeerMessage; }

// Calls visit(record index, is_hello, table, field) for each version field.
template <typename F>
void for_each_version(std::vector<Record>& records, F&& visit) {
  for (size_t i = 0; i < records.size(); ++i) {
    if (!carries_messages(records[i].kind)) continue;
    const Fields f = fields_of(records[i].bytes);
    if (f.message != nullptr) visit(i, false, *f.message, fb::Message::VT_VERSION);
    if (f.hello != nullptr) visit(i, true, *f.hello, fb::Hello::VT_VERSION);
  }
}

}  // namespace

std::string StaleVersion::describe() const {
  return fmt::format("record {} holds a {} of protocol version {}, not {}", record, hello ? "Hello" : "Message",
                     version, protocol::kVersion);
}

std::vector<StaleVersion> stale_versions(std::span<const uint8_t> input) {
  std::vector<Record> records = decode_records(input);
  std::vector<StaleVersion> out;
  for_each_version(records, [&](size_t i, bool hello, flatbuffers::Table& table, flatbuffers::voffset_t field) {
    const auto version = table.GetField<uint32_t>(field, 0);
    if (version != protocol::kVersion) out.push_back({i, hello, version});
  });
  return out;
}

std::vector<uint8_t> restamp_versions(std::span<const uint8_t> input, size_t* restamped) {
  std::vector<Record> records = decode_records(input);
  size_t changed = 0;
  for_each_version(records, [&](size_t i, bool hello, flatbuffers::Table& table, flatbuffers::voffset_t field) {
    if (table.GetField<uint32_t>(field, 0) == protocol::kVersion) return;
    // A field left at its default (0) has no bytes to change in place.
    if (!table.SetField<uint32_t>(field, protocol::kVersion, 0)) {
      THD_THROW(ValueError, "restamp_versions", "record {}: its {} has no version field to set", i,
                hello ? "Hello" : "Message");
    }
    ++changed;
  });
  if (restamped != nullptr) *restamped = changed;
  return encode_records(records);
}

}  // namespace thd::fuzz
