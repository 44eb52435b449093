// FileStore beyond the common contract: the file itself, several processes, and
// recovery from a writer that died mid-append.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <thd/store.h>

#include "datachannel/test_util.h"

namespace thd {
namespace {

using namespace std::chrono_literals;

TEST(FileStore, CreatesTheFileReadableByItsOwnerOnly) {
  test::TempDir dir;
  const std::string path = dir.file("store");
  FileStore s(path);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(s.path(), path);
}

TEST(FileStore, RefusesAFileThatIsNotAStore) {
  test::TempDir dir;
  const std::string path = dir.file("notes.txt");
  std::ofstream(path) << "some unrelated file\n";
  THD_EXPECT_THROW_MSG(FileStore{path}, ValueError, "is not a thd FileStore file");
  // Short files too: a store would truncate a torn header, never a stranger's file.
  const std::string tiny = dir.file("tiny");
  std::ofstream(tiny) << "hi";
  THD_EXPECT_THROW_MSG(FileStore{tiny}, ValueError, "is not a thd FileStore file");
  EXPECT_EQ(std::filesystem::file_size(tiny), 2u);
  THD_EXPECT_THROW_MSG(FileStore{dir.file("no/such/dir/store")}, ConnectionError, "cannot open the store file");
}

TEST(FileStore, ATornLastRecordIsIgnoredThenCutOff) {
  test::TempDir dir;
  const std::string path = dir.file("store");
  FileStore a(path);
  a.set("k", "v");
  const auto good_size = std::filesystem::file_size(path);
  {
    // What a writer that died in the middle of appending a Set leaves behind.
    std::ofstream f(path, std::ios::app | std::ios::binary);
    const char torn[] = {1, 5, 0, 0, 0, 'p', 'a'};
    f.write(torn, sizeof(torn));
  }
  FileStore b(path);  // opening writes nothing, but the exclusive lock cuts the tail
  EXPECT_EQ(b.get_string("k"), "v");
  EXPECT_EQ(std::filesystem::file_size(path), good_size);
  b.set("k2", "v2");
  EXPECT_EQ(a.get_string("k2"), "v2");
  EXPECT_EQ(a.num_keys(), 2);
}

TEST(FileStore, TheLastOfWorldSizeStoresRemovesTheFile) {
  test::TempDir dir;
  const std::string path = dir.file("store");
  {
    auto a = std::make_unique<FileStore>(path, 2);
    auto b = std::make_unique<FileStore>(path, 2);
    a->set("k", "v");
    a.reset();
    EXPECT_TRUE(std::filesystem::exists(path));
    EXPECT_EQ(b->get_string("k"), "v");
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  // Without a world size the file stays.
  { FileStore c(path); }
  EXPECT_TRUE(std::filesystem::exists(path));
}

TEST(FileStore, ARecreatedFileIsReadAfresh) {
  test::TempDir dir;
  const std::string path = dir.file("store");
  FileStore a(path);
  a.set("old", "1");
  std::filesystem::remove(path);
  FileStore b(path);
  b.set("new", "2");
  EXPECT_FALSE(a.check({"old"}));
  EXPECT_TRUE(a.check({"new"}));
}

TEST(FileStore, ProcessesIncrementingOneCounterGetAnExactTotal) {
  test::TempDir dir;
  const std::string path = dir.file("store");
  FileStore store(path);
  constexpr int kProcs = 4;
  constexpr int kAdds = 50;
  test::Children children;
  for (int p = 0; p < kProcs; ++p) {
    children.spawn([&path] {
      FileStore s(path);
      for (int i = 0; i < kAdds; ++i) s.add("counter", 1);
      s.set("waited-for", "yes");
      return 0;
    });
  }
  EXPECT_EQ(store.get_string("waited-for"), "yes");  // blocks across processes
  EXPECT_EQ(children.wait_all(), std::vector<int>(kProcs, 0));
  EXPECT_EQ(store.add("counter", 0), kProcs * kAdds);
}

}  // namespace
}  // namespace thd
