// A default job under thdrun, at its most verbose (THD_LOG_LEVEL=debug, a trace,
// tagged output) and probed by intruders while it runs: the job's token never
// appears in what it prints, in its trace, in any command line of its processes
// (thdrun, the master, the workers), or in their environments (they get the
// token file's path); the files that hold or come from the job are private; and
// everything the job listens on is loopback. The store's file (file://) is
// private too.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <thd/store.h>

#include "attacks.h"
#include "fault_checks.h"
#include "pool_process.h"
#include "proc_audit.h"
#include "roles.h"
#include "test_util.h"

namespace thd::test {
namespace {

using namespace std::chrono_literals;

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Permission bits and owner of `path`; mode -1 when it does not exist.
struct Mode {
  int bits = -1;
  uid_t owner = 0;
  bool regular = false;
  bool directory = false;
};

Mode mode_of(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return {};
  return {static_cast<int>(st.st_mode & 07777), st.st_uid, S_ISREG(st.st_mode), S_ISDIR(st.st_mode)};
}

std::string field(const std::string& text, const std::string& name) {
  const size_t at = text.find(name + "=");
  if (at == std::string::npos) return "";
  const size_t begin = at + name.size() + 1;
  return text.substr(begin, text.find_first_of(" \n", begin) - begin);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(Secrets, TheTokenStaysInItsFileAndTheJobOnLoopback) {
  TempDir dir;
  const std::string release = dir.file("release");
  const std::string trace = dir.file("trace.json");
  TestProcess job({pool_thdrun_path(), "-n", "3", "--tag-output", self_path(), kMasterRole, "audit"},
                  {{"THD_LOG_LEVEL", "debug"},
                   {"THD_TRACE", trace},
                   {"THD_BACKEND", "tcp"},
                   {"THD_HARDENING_RELEASE", release},
                   {"TMPDIR", dir.path().string()}});

  ASSERT_TRUE(job.wait_for_output("master ready", 20000ms)) << job.output();
  const std::string out = job.output();
  const std::string token_file = field(out, "token_file");
  const std::string token = file_text(token_file).substr(0, 64);
  ASSERT_EQ(token.size(), 64u) << "token file '" << token_file << "':\n" << out;

  // The token file and its directory are the owner's alone.
  const Mode file_mode = mode_of(token_file);
  EXPECT_TRUE(file_mode.regular);
  EXPECT_EQ(file_mode.bits, 0600) << token_file;
  EXPECT_EQ(file_mode.owner, ::geteuid());
  const std::string token_dir = std::filesystem::path(token_file).parent_path().string();
  const Mode dir_mode = mode_of(token_dir);
  EXPECT_TRUE(dir_mode.directory);
  EXPECT_EQ(dir_mode.bits, 0700) << token_dir;

  // Intruders knock on the store, so the refusal paths log too (at warn).
  const auto port = static_cast<uint16_t>(std::stoi(field(out, "port")));
  EXPECT_TRUE(refused(port, Attack::WrongToken, {}));
  EXPECT_TRUE(refused(port, Attack::Garbage, std::vector<uint8_t>(80, 0)));

  // Command lines and environments of thdrun, the master and the workers.
  const std::vector<pid_t> tree = process_tree(job.pid());
  EXPECT_GE(tree.size(), 4u) << "thdrun and its three ranks";
  for (pid_t pid : tree) {
    const std::string cmdline = read_proc_file(pid, "cmdline");
    const std::string environ = read_proc_file(pid, "environ");
    EXPECT_FALSE(cmdline.empty()) << "pid " << pid;
    EXPECT_FALSE(contains(cmdline, token)) << "the token is in the command line of pid " << pid;
    EXPECT_FALSE(contains(environ, token)) << "the token is in the environment of pid " << pid;
    EXPECT_FALSE(contains(std::string(1, '\0') + environ, std::string(1, '\0') + "THD_AUTH_TOKEN="))
        << "pid " << pid << " has THD_AUTH_TOKEN in its environment";
    if (pid != job.pid()) {
      EXPECT_TRUE(contains(environ, "THD_AUTH_TOKEN_FILE=" + token_file)) << "rank pid " << pid;
    }
  }

  // What the job listens on now: the store.
  const std::vector<ListeningSocket> listening = listening_sockets(tree);
  EXPECT_FALSE(listening.empty()) << "the store's listener was not found";
  for (const ListeningSocket& l : listening) {
    EXPECT_EQ(l.address, "127.0.0.1") << "pid " << l.pid << " listens on " << l.address << ":" << l.port;
  }

  std::ofstream(release) << "go\n";
  ASSERT_EQ(job.wait(20000ms), 0) << job.output();
  const std::string all_output = job.output();
  EXPECT_TRUE(contains(all_output, "[thd debug")) << "debug logging was not on:\n" << all_output;
  EXPECT_TRUE(contains(all_output, "refused the connection")) << "the intruders were not logged:\n" << all_output;
  EXPECT_FALSE(contains(all_output, token)) << "the token is in the job's output";
  const Mode trace_mode = mode_of(trace);
  EXPECT_TRUE(trace_mode.regular) << "no trace written at " << trace;
  EXPECT_EQ(trace_mode.bits, 0600) << trace;
  EXPECT_FALSE(contains(file_text(trace), token)) << "the token is in the trace";
  EXPECT_FALSE(std::filesystem::exists(token_dir)) << "thdrun left its token directory behind";
}

TEST(Secrets, ADefaultJobListensOnLoopbackOnly) {
  // Ranks 0 and 1 of a tcp DataChannel with the default options wait for rank 2
  // with their mesh listeners open; rank 0 hosts the store.
  TempDir dir;
  const std::string release = dir.file("release");
  TestProcess job({pool_thdrun_path(), "-n", "3", self_path(), kMasterRole, "mesh"},
                  {{"THD_HARDENING_RELEASE", release}, {"TMPDIR", dir.path().string()}});
  std::vector<ListeningSocket> listening;
  for (auto deadline = Clock::now() + 20s; listening.size() < 3 && Clock::now() < deadline && job.running();) {
    std::this_thread::sleep_for(5ms);
    listening = listening_sockets(process_tree(job.pid()));
  }
  EXPECT_EQ(listening.size(), 3u) << "expected the store's listener and two mesh listeners:\n" << job.output();
  for (const ListeningSocket& l : listening) {
    EXPECT_EQ(l.address, "127.0.0.1") << "pid " << l.pid << " listens on " << l.address << ":" << l.port;
  }
  std::ofstream(release) << "go\n";
  EXPECT_EQ(job.wait(20000ms), 0) << job.output();
}

TEST(Secrets, AFileStoreIsPrivate) {
  TempDir dir;
  const std::string path = dir.file("store");
  FileStore store(path, /*world_size=*/1, 5000ms);
  store.set("addr/0", "127.0.0.1:1");
  const Mode m = mode_of(path);
  EXPECT_TRUE(m.regular);
  EXPECT_EQ(m.bits, 0600) << path;
  EXPECT_EQ(m.owner, ::geteuid());
}

}  // namespace
}  // namespace thd::test
