// The g++ build's form of a fuzz target: a test that runs LLVMFuzzerTestOneInput
// over every file under the paths it is given (ctest passes the target's seed
// corpus and its regressions; a file path replays one input, e.g. a crash libFuzzer
// saved). No sanitizers here: this catches regressions that crash, abort, break an
// invariant or let an exception escape, in every scripts/test run, without clang.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_target.h"

namespace {

namespace fs = std::filesystem;

std::vector<std::string> g_paths;

std::vector<fs::path> inputs_under(const std::string& path) {
  std::vector<fs::path> out;
  if (fs::is_regular_file(path)) return {fs::path(path)};
  if (!fs::is_directory(path)) return out;
  for (const auto& entry : fs::recursive_directory_iterator(path)) {
    // README files explain a directory; they are not inputs.
    if (entry.is_regular_file() && entry.path().filename() != "README.md") out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(FuzzReplay, EveryInputRunsCleanly) {
  size_t replayed = 0;
  for (const std::string& path : g_paths) {
    for (const fs::path& file : inputs_under(path)) {
      std::ifstream in(file, std::ios::binary);
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      // Printed first: if the input crashes the process, the log names it.
      std::printf("replaying %s (%zu bytes)\n", file.c_str(), bytes.size());
      std::fflush(stdout);
      try {
        LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      } catch (const std::exception& e) {
        ADD_FAILURE() << file << ": an exception escaped the target: " << e.what();
      }
      ++replayed;
    }
  }
  EXPECT_GT(replayed, 0u) << "no inputs found under the given paths";
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  g_paths.assign(argv + 1, argv + argc);
  return RUN_ALL_TESTS();
}
