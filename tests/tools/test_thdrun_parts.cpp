// thdrun's parts in-process: the token directory, the ranks' environment, the
// free port, wait statuses and tagged output.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <thd/error.h>

#include "expect_throw.h"
#include "tools/thdrun/free_port.h"
#include "tools/thdrun/rank_env.h"
#include "tools/thdrun/spawn.h"
#include "tools/thdrun/tagged_output.h"
#include "tools/thdrun/token_dir.h"

namespace thd::launch {
namespace {

namespace fs = std::filesystem;

bool is_hex(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(ThdrunToken, RandomHexIsFreshEachTime) {
  const std::string a = random_token_hex();
  const std::string b = random_token_hex();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_TRUE(is_hex(a)) << a;
  EXPECT_NE(a, b);
  EXPECT_EQ(random_token_hex(4).size(), 8u);
}

TEST(ThdrunToken, PrivateDirectoryRemovedWithItsOwner) {
  std::string dir;
  {
    TokenDir token = TokenDir::create();
    dir = token.dir();
    EXPECT_EQ(fs::path(token.file()).parent_path(), fs::path(dir));
    EXPECT_EQ(mode_of(dir), 0700u);
    EXPECT_EQ(mode_of(token.file()), 0600u);
    std::ifstream in(token.file());
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_EQ(content.size(), 65u);
    EXPECT_EQ(content.back(), '\n');
    EXPECT_TRUE(is_hex(content.substr(0, 64)));

    // A move hands the directory over; only the last owner removes it.
    TokenDir moved = std::move(token);
    EXPECT_TRUE(token.dir().empty());
    EXPECT_EQ(moved.dir(), dir);
    // What a rank leaves in the directory goes with it.
    std::ofstream(dir + "/extra") << "x";
  }
  EXPECT_FALSE(fs::exists(dir)) << dir;
}

TEST(ThdrunToken, AJobWithAnInheritedTokenStillGetsAPrivateDirectory) {
  std::string dir;
  {
    TokenDir run_dir = TokenDir::create(/*with_token=*/false);
    dir = run_dir.dir();
    EXPECT_TRUE(run_dir.file().empty());
    EXPECT_EQ(mode_of(dir), 0700u);
    EXPECT_TRUE(fs::is_empty(dir));
    EXPECT_EQ(fs::path(run_dir.job_mode_file()).parent_path(), fs::path(dir));
  }
  EXPECT_FALSE(fs::exists(dir)) << dir;
}

TEST(ThdrunToken, FileModeIgnoresTheUmask) {
  const mode_t old = ::umask(0);
  TokenDir token = TokenDir::create();
  ::umask(old);
  EXPECT_EQ(mode_of(token.file()), 0600u);
}

TEST(ThdrunEnv, RankVariablesReplaceInheritedOnes) {
  const std::vector<std::string> base = {"PATH=/bin", "RANK=9", "RANKING=keep", "MASTER_PORT=1", "X=a=b"};
  JobEnv job{.master_addr = "10.0.0.1", .master_port = 29555, .world_size = 8, .local_world_size = 4,
             .first_rank = 4, .token_file = "/tmp/d/token", .job_mode_file = "/tmp/d/job_mode"};
  const std::vector<std::string> env = rank_environment(base, job, 1);
  EXPECT_EQ(find_variable(env, "PATH"), "/bin");
  EXPECT_EQ(find_variable(env, "RANKING"), "keep");
  EXPECT_EQ(find_variable(env, "X"), "a=b");
  EXPECT_EQ(find_variable(env, "RANK"), "5");
  EXPECT_EQ(find_variable(env, "LOCAL_RANK"), "1");
  EXPECT_EQ(find_variable(env, "WORLD_SIZE"), "8");
  EXPECT_EQ(find_variable(env, "LOCAL_WORLD_SIZE"), "4");
  EXPECT_EQ(find_variable(env, "MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(find_variable(env, "MASTER_PORT"), "29555");
  EXPECT_EQ(find_variable(env, "THD_AUTH_TOKEN_FILE"), "/tmp/d/token");
  EXPECT_EQ(find_variable(env, "THD_JOB_MODE_FILE"), "/tmp/d/job_mode");
  EXPECT_EQ(std::count_if(env.begin(), env.end(), [](const std::string& e) { return e.starts_with("RANK="); }), 1);
  // The PSM driver's signal handlers stay out of the ranks from their first instant.
  EXPECT_EQ(find_variable(env, "IPATH_NO_BACKTRACE"), "1");
  EXPECT_EQ(env.size(), base.size() - 2 + 9);
  EXPECT_EQ(find_variable(rank_environment({"IPATH_NO_BACKTRACE=0"}, job, 0), "IPATH_NO_BACKTRACE"), "0");

  job.token_file.reset();
  job.job_mode_file.reset();
  EXPECT_FALSE(find_variable(rank_environment(base, job, 0), "THD_AUTH_TOKEN_FILE").has_value());
  EXPECT_FALSE(find_variable(rank_environment(base, job, 0), "THD_JOB_MODE_FILE").has_value());
}

TEST(ThdrunEnv, InheritedTokenIsDetected) {
  EXPECT_FALSE(has_auth_token({"PATH=/bin", "THD_AUTH_TOKENS=x"}));
  EXPECT_TRUE(has_auth_token({"THD_AUTH_TOKEN=secret"}));
  EXPECT_TRUE(has_auth_token({"THD_AUTH_TOKEN_FILE=/run/t"}));
}

TEST(ThdrunEnv, FreePortCanBeBound) {
  const uint16_t port = pick_free_port("127.0.0.1");
  EXPECT_GT(port, 0);
  // Free: it can be bound right away.
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << std::strerror(errno);
}

TEST(ThdrunEnv, FreePortOnABadAddressNamesIt) {
  THD_EXPECT_THROW_MSG(pick_free_port("no-such-host.invalid"), ConnectionError, "'no-such-host.invalid'");
  // 192.0.2.0/24 is reserved for documentation: no interface has it.
  THD_EXPECT_THROW_MSG(pick_free_port("192.0.2.1"), ConnectionError, "cannot bind a port on the master address '192.0.2.1'");
}

int status_of_child(const std::function<void()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(ThdrunWaitStatus, ExitCodesAndSignals) {
  const int exited = status_of_child([] { ::_exit(3); });
  EXPECT_EQ(describe_wait_status(exited), "exited with status 3");
  EXPECT_EQ(exit_code_of(exited), 3);
  const int killed = status_of_child([] { ::raise(SIGKILL); });
  EXPECT_EQ(describe_wait_status(killed), "was killed by signal SIGKILL");
  EXPECT_EQ(exit_code_of(killed), 128 + SIGKILL);
}

// The pipe a rank writes to, and the one the launcher's "stdout" is.
struct TaggedPair {
  TaggedPair() {
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) throw std::runtime_error("pipe");
    rank_write.reset(in[1]);
    stdout_read.reset(out[0]);
    stdout_write.reset(out[1]);
    // Room for a whole cut line: nothing reads this pipe until the test is done.
    ::fcntl(out[1], F_SETPIPE_SZ, 1 << 20);
    tagged.emplace("[rank 1] ", UniqueFd(in[0]), stdout_write.get());
  }
  void write(const std::string& s) { ASSERT_EQ(::write(rank_write.get(), s.data(), s.size()), ssize_t(s.size())); }
  std::string written() {
    stdout_write.reset();
    std::string all;
    char buf[4096];
    for (ssize_t n; (n = ::read(stdout_read.get(), buf, sizeof buf)) > 0;) all.append(buf, size_t(n));
    return all;
  }
  UniqueFd rank_write, stdout_read, stdout_write;
  std::optional<TaggedOutput> tagged;
};

TEST(ThdrunTaggedOutput, WholeLinesOnlyThenTheRestAtEnd) {
  TaggedPair p;
  p.write("one\ntw");
  p.tagged->pump();
  p.write("o\nthree");
  p.tagged->pump();
  EXPECT_TRUE(p.tagged->open());
  p.rank_write.reset();  // the rank exits
  p.tagged->pump();
  EXPECT_FALSE(p.tagged->open());
  EXPECT_EQ(p.written(), "[rank 1] one\n[rank 1] two\n[rank 1] three\n");
}

TEST(ThdrunTaggedOutput, FinishDoesNotWaitForEndOfFile) {
  TaggedPair p;
  p.write("last words");
  p.tagged->finish();  // the write end is still open (a process the rank left behind)
  EXPECT_FALSE(p.tagged->open());
  EXPECT_EQ(p.written(), "[rank 1] last words\n");
}

TEST(ThdrunTaggedOutput, EndlessLineIsCut) {
  TaggedPair p;
  const std::string chunk(kMaxTaggedLine / 4, 'x');
  for (int i = 0; i < 5; ++i) {
    p.write(chunk);
    p.tagged->pump();
  }
  p.rank_write.reset();
  p.tagged->pump();
  const std::string out = p.written();
  EXPECT_EQ(out, "[rank 1] " + std::string(kMaxTaggedLine, 'x') + "\n[rank 1] " + chunk + "\n");
}

}  // namespace
}  // namespace thd::launch
