// The worker_batch inputs kept in the repository (its seed corpus and the
// regressions of findings) reach past the worker's version check: an input whose
// Messages carry another protocol version is refused there, before the code it
// was recorded or crafted for, and its replay then passes without testing
// anything. Linked into the worker_batch replay test (tests/fuzz/CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "message_versions.h"
#include "protocol/codec.h"
#include "worker_script.h"

namespace thd::fuzz {
namespace {

namespace fs = std::filesystem;
namespace fb = protocol::fb;

std::vector<uint8_t> read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> hello_of_version(uint32_t version) {
  flatbuffers::FlatBufferBuilder b;
  auto hello = fb::CreateHello(b, version, 1, 0, 2, 42, false);
  b.Finish(fb::CreateMessage(b, version, fb::Body::Hello, hello.Union()));
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

TEST(FuzzInputVersions, TheCheckFindsAndRestampsAnOlderVersion) {
  const std::vector<uint8_t> input = encode_records({{RecordKind::Message, kRawDType, hello_of_version(3)},
                                                     {RecordKind::CommandFrame, 0xff, {1, 2, 3}},
                                                     {RecordKind::Message, kRawDType, {9, 9, 9, 9, 9}}});
  const std::vector<StaleVersion> stale = stale_versions(input);
  ASSERT_EQ(stale.size(), 2u);  // the Message's and its Hello's; the garbage record is not a Message
  EXPECT_EQ(stale[0].record, 0u);
  EXPECT_FALSE(stale[0].hello);
  EXPECT_EQ(stale[0].version, 3u);
  EXPECT_TRUE(stale[1].hello);
  size_t restamped = 0;
  const std::vector<uint8_t> fixed = restamp_versions(input, &restamped);
  EXPECT_EQ(restamped, 2u);
  EXPECT_TRUE(stale_versions(fixed).empty());
  const std::vector<Record> records = decode_records(fixed);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].bytes, hello_of_version(protocol::kVersion));
  EXPECT_EQ(records[2].bytes, (std::vector<uint8_t>{9, 9, 9, 9, 9}));
}

TEST(FuzzInputVersions, KeptWorkerBatchInputsCarryThisProtocolVersion) {
  size_t inputs = 0;
  for (const fs::path& dir : {fs::path(THD_FUZZ_INPUTS_DIR) / "corpus" / "worker_batch",
                             fs::path(THD_FUZZ_INPUTS_DIR) / "regressions" / "worker_batch"}) {
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_regular_file() || entry.path().filename() == "README.md") continue;
      ++inputs;
      for (const StaleVersion& s : stale_versions(read_file(entry.path()))) {
        ADD_FAILURE() << entry.path() << ": " << s.describe()
                      << ": the worker refuses it at its version check, before the code the input was made for. "
                         "Restamp it: build/bin/thd_fuzz_seed --restamp "
                      << entry.path().string();
      }
    }
  }
  EXPECT_GT(inputs, 0u);
}

}  // namespace
}  // namespace thd::fuzz
