// The thdrun binary: its command line, the environment and token it gives the
// ranks, and programs it cannot run.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <thd/config.h>

#include "thdrun_runner.h"

namespace thd::test {
namespace {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;

// "env rank=0 world=3 ..." -> {"rank": "0", "world": "3", ...}
std::map<std::string, std::string> fields(const std::string& line) {
  std::map<std::string, std::string> out;
  static const std::regex kField("([a-z_]+)=(\\S*)");
  for (std::sregex_iterator it(line.begin(), line.end(), kField), end; it != end; ++it) out[(*it)[1]] = (*it)[2];
  return out;
}

std::vector<std::map<std::string, std::string>> lines_starting(const ThdrunResult& r, const std::string& word) {
  std::vector<std::map<std::string, std::string>> out;
  for (const std::string& line : r.out_lines()) {
    if (line.starts_with(word + " ")) out.push_back(fields(line));
  }
  return out;
}

class ThdrunLaunch : public ::testing::Test {
 protected:
  ThdrunResult run(const ThdrunRun& r) { return run_thdrun_checked(r); }
};

TEST_F(ThdrunLaunch, HelpAndVersion) {
  ThdrunResult help = run({.args = {"--help"}});
  EXPECT_EQ(help.status, 0) << describe(help);
  EXPECT_NE(help.out.find("usage: thdrun -n N"), std::string::npos);
  EXPECT_EQ(help.err, "");
  ThdrunResult version = run({.args = {"--version"}});
  EXPECT_EQ(version.status, 0);
  EXPECT_EQ(version.out, std::string("thdrun (thd) ") + THD_VERSION_STRING + "\n");
}

TEST_F(ThdrunLaunch, BadArgumentsExit2WithTheReasonAndUsage) {
  const std::vector<std::pair<Args, std::string>> cases = {
      {{"-n", "0", "true"}, "-n expects a number of processes from 1 to 1024, got '0'"},
      {{"--frobnicate", "-n", "1", "true"}, "unknown option '--frobnicate'"},
      {{"true"}, "missing -n N"},
      {{"-n", "2"}, "no program to run"},
  };
  for (const auto& [args, message] : cases) {
    ThdrunResult r = run({.args = args});
    EXPECT_EQ(r.status, 2) << describe(r);
    EXPECT_NE(r.err.find("thdrun: " + message), std::string::npos) << describe(r);
    EXPECT_NE(r.err.find("usage: thdrun"), std::string::npos) << describe(r);
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(ThdrunLaunch, EveryRankGetsItsEnvironment) {
  ThdrunResult r = run(probe_run({"-n", "3"}, {"env"}));
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.err, "");  // nothing to say on success
  auto envs = lines_starting(r, "env");
  ASSERT_EQ(envs.size(), 3u) << describe(r);
  std::set<std::string> ranks, ports, token_files;
  for (auto& e : envs) {
    ranks.insert(e["rank"]);
    EXPECT_EQ(e["local_rank"], e["rank"]);
    EXPECT_EQ(e["world"], "3");
    EXPECT_EQ(e["local_world"], "3");
    EXPECT_EQ(e["addr"], "127.0.0.1");
    ports.insert(e["port"]);
    token_files.insert(e["token_file"]);
    EXPECT_EQ(e["token"], "unset");  // the secret itself is never in the environment
    EXPECT_EQ(e["pgid"], e["pid"]);  // each rank leads its own process group
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2"}));
  ASSERT_EQ(ports.size(), 1u);
  const int port = std::stoi(*ports.begin());
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  ASSERT_EQ(token_files.size(), 1u);
  EXPECT_NE(*token_files.begin(), "-");
  EXPECT_FALSE(fs::exists(*token_files.begin()));
}

TEST_F(ThdrunLaunch, MasterAddressAndPortOptions) {
  ThdrunResult r = run(probe_run({"-n", "2", "--master-addr", "localhost", "--master-port", "29777"}, {"env"}));
  ASSERT_EQ(r.status, 0) << describe(r);
  for (auto& e : lines_starting(r, "env")) {
    EXPECT_EQ(e["addr"], "localhost");
    EXPECT_EQ(e["port"], "29777");
  }
}

TEST_F(ThdrunLaunch, DefaultPortIsFreeAndNotFixed) {
  std::set<std::string> ports;
  for (int i = 0; i < 3; ++i) {
    // Rank 0 binds the port it was given: it was free.
    ThdrunResult r = run(probe_run({"-n", "2"}, {"@0", "bind", "env"}));
    ASSERT_EQ(r.status, 0) << describe(r);
    auto bound = lines_starting(r, "bound");
    ASSERT_EQ(bound.size(), 1u) << describe(r);
    for (auto& e : lines_starting(r, "env")) EXPECT_EQ(e["port"], bound[0]["port"]);
    ports.insert(bound[0]["port"]);
  }
  // Ephemeral ports are drawn at random: three runs never all get the same one
  // unless the port is fixed.
  EXPECT_GE(ports.size(), 2u);
}

TEST_F(ThdrunLaunch, RanksRendezvousThroughTheEnvironment) {
  ThdrunResult r = run(probe_run({"-n", "3"}, {"rendezvous"}));
  ASSERT_EQ(r.status, 0) << describe(r);
  std::set<std::string> ranks;
  for (auto& e : lines_starting(r, "rendezvous")) {
    EXPECT_EQ(e["world"], "3");
    ranks.insert(e["rank"]);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2"})) << describe(r);
}

TEST_F(ThdrunLaunch, TokenFileIsPrivateWhileRunningAndGoneAfter) {
  ThdrunResult r = run(probe_run({"-n", "2"}, {"token"}));
  ASSERT_EQ(r.status, 0) << describe(r);
  auto dirs = lines_starting(r, "token");
  ASSERT_EQ(dirs.size(), 2u) << describe(r);
  EXPECT_EQ(dirs[0]["dir"], dirs[1]["dir"]);
  EXPECT_TRUE(dirs[0]["dir"].starts_with(r.tmpdir + "/thdrun-")) << dirs[0]["dir"];  // under $TMPDIR
  EXPECT_FALSE(fs::exists(dirs[0]["dir"]));
}

TEST_F(ThdrunLaunch, TokenDirectoryIsRemovedWhenARankFails) {
  ThdrunResult r = run(probe_run({"-n", "2", "--timeout-kill", "1"}, {"token", "@1", "exit", "4", "sleep", "30"}));
  EXPECT_EQ(r.status, 4) << describe(r);
  auto dirs = lines_starting(r, "token");
  ASSERT_FALSE(dirs.empty()) << describe(r);
  EXPECT_FALSE(fs::exists(dirs[0]["dir"]));
}

TEST_F(ThdrunLaunch, TokenFromTheEnvironmentIsKept) {
  ThdrunRun with_token = probe_run({"-n", "2"}, {"env", "rendezvous"});
  with_token.env = {{"THD_AUTH_TOKEN", "an-outer-launchers-secret"}};
  ThdrunResult r = run(with_token);
  ASSERT_EQ(r.status, 0) << describe(r);
  for (auto& e : lines_starting(r, "env")) {
    EXPECT_EQ(e["token"], "set");
    EXPECT_EQ(e["token_file"], "-");
  }
  EXPECT_EQ(lines_starting(r, "rendezvous").size(), 2u) << describe(r);

  ThdrunRun with_file = probe_run({"-n", "1"}, {"env"});
  with_file.env = {{"THD_AUTH_TOKEN_FILE", "/run/elsewhere/token"}};
  r = run(with_file);
  ASSERT_EQ(r.status, 0) << describe(r);
  auto envs = lines_starting(r, "env");
  ASSERT_EQ(envs.size(), 1u);
  EXPECT_EQ(envs[0]["token_file"], "/run/elsewhere/token");
}

TEST_F(ThdrunLaunch, Rank0ReadsAPipedStdin) {
  ThdrunRun piped = probe_run({"-n", "2"}, {"stdin"});
  piped.stdin_text = "line one\nline two\n";
  ThdrunResult r = run(piped);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.out.find("stdin rank=0 text=line oneline two\n"), std::string::npos) << describe(r);
  EXPECT_NE(r.out.find("stdin rank=1 text=\n"), std::string::npos) << describe(r);  // /dev/null
}

TEST_F(ThdrunLaunch, ProgramIsFoundThroughPath) {
  ThdrunRun run_by_name;
  run_by_name.args = {"-n", "2", fs::path(probe_path()).filename().string(), "env"};
  const char* path = std::getenv("PATH");
  run_by_name.env = {{"PATH", fs::path(probe_path()).parent_path().string() + ":" + (path ? path : "/usr/bin")}};
  ThdrunResult r = run(run_by_name);
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(lines_starting(r, "env").size(), 2u);
}

TEST_F(ThdrunLaunch, ProgramNotFoundExits127NamingIt) {
  ThdrunResult r = run({.args = {"-n", "3", "thd-no-such-program-7f3a", "arg"}});
  EXPECT_EQ(r.status, 127) << describe(r);
  EXPECT_NE(r.err.find("thdrun: cannot run 'thd-no-such-program-7f3a': No such file or directory (not found in PATH)"),
            std::string::npos)
      << describe(r);
  // Said once, not once per rank.
  EXPECT_EQ(r.err.find("cannot run", r.err.find("cannot run") + 1), std::string::npos) << describe(r);
}

TEST_F(ThdrunLaunch, ProgramThatCannotRunExits126) {
  const fs::path dir = fs::temp_directory_path() / ("thdrun_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path script = dir / "not-executable";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  fs::permissions(script, fs::perms::owner_read | fs::perms::owner_write);
  ThdrunResult r = run({.args = {"-n", "1", script.string()}});
  fs::remove_all(dir);
  EXPECT_EQ(r.status, 126) << describe(r);
  EXPECT_NE(r.err.find("cannot run '" + script.string() + "': Permission denied"), std::string::npos) << describe(r);
}

}  // namespace
}  // namespace thd::test
