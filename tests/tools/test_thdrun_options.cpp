// thdrun's command line, parsed in-process.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <thd/config.h>
#include <thd/datachannel.h>
#include <thd/error.h>

#include "expect_throw.h"
#include "tools/thdrun/options.h"

namespace thd::launch {
namespace {

using Args = std::vector<std::string>;

ParsedArgs parse(const Args& args) { return parse_args(args); }

TEST(ThdrunOptions, DefaultsAndProgramArguments) {
  ParsedArgs p = parse({"-n", "3", "prog", "a", "-n", "--tag-output"});
  ASSERT_EQ(p.action, Action::Run);
  const LaunchOptions& o = p.options;
  EXPECT_EQ(o.nproc, 3);
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_FALSE(o.master_port.has_value());
  EXPECT_EQ(o.kill_grace, std::chrono::milliseconds(5000));
  EXPECT_FALSE(o.tag_output);
  // Everything from the program on is the program's, options included.
  EXPECT_EQ(o.command, (Args{"prog", "a", "-n", "--tag-output"}));
}

TEST(ThdrunOptions, EverySpelling) {
  EXPECT_EQ(parse({"-n4", "p"}).options.nproc, 4);
  EXPECT_EQ(parse({"--nproc", "5", "p"}).options.nproc, 5);
  EXPECT_EQ(parse({"--nproc-per-node=6", "p"}).options.nproc, 6);
  EXPECT_EQ(parse({"--nproc-per-node", "7", "p"}).options.nproc, 7);

  ParsedArgs p = parse({"--master-addr", "10.1.2.3", "--master-port=29501", "--timeout-kill", "0.25",
                        "--tag-output", "-n", "2", "--", "-dash-program", "x"});
  EXPECT_EQ(p.options.master_addr, "10.1.2.3");
  EXPECT_EQ(p.options.master_port, uint16_t{29501});
  EXPECT_EQ(p.options.kill_grace, std::chrono::milliseconds(250));
  EXPECT_TRUE(p.options.tag_output);
  EXPECT_EQ(p.options.command, (Args{"-dash-program", "x"}));
  EXPECT_EQ(parse({"--timeout-kill=0", "-n", "1", "p"}).options.kill_grace, std::chrono::milliseconds(0));
}

TEST(ThdrunOptions, BackendIsPassedOnByName) {
  EXPECT_FALSE(parse({"-n", "2", "p"}).options.backend.has_value());
  for (const auto& name : DataChannel::available_backends()) {
    EXPECT_EQ(parse({"--backend", name, "-n", "2", "p"}).options.backend, name);
    EXPECT_EQ(parse({"--backend=" + name, "-n", "2", "p"}).options.backend, name);
  }
  EXPECT_THROW(parse({"--backend=", "-n", "2", "p"}), ValueError);
  EXPECT_THROW(parse({"--backend", "a b", "-n", "2", "p"}), ValueError);
}

TEST(ThdrunOptions, BackendIsOneTheRegistryLists) {
  // The message lists what is available; --help does too.
  const auto available = DataChannel::available_backends();
  ASSERT_FALSE(available.empty());
  try {
    parse({"--backend", "no-such-backend", "-n", "2", "p"});
    ADD_FAILURE() << "an unknown backend was accepted";
  } catch (const ValueError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("no-such-backend"), std::string::npos) << message;
    for (const auto& name : available) EXPECT_NE(message.find(name), std::string::npos) << message;
  }
  const std::string help = help_text();
  const size_t line = help.find("\nbackends: ");
  ASSERT_NE(line, std::string::npos) << help;
  for (const auto& name : available) EXPECT_NE(help.find(name, line), std::string::npos) << help;
}

TEST(ThdrunOptions, OnRankFailurePolicies) {
  EXPECT_EQ(parse({"-n", "2", "p"}).options.on_rank_failure, OnRankFailure::Auto);
  EXPECT_EQ(parse({"--on-rank-failure", "auto", "-n", "2", "p"}).options.on_rank_failure, OnRankFailure::Auto);
  EXPECT_EQ(parse({"--on-rank-failure=kill-all", "-n", "2", "p"}).options.on_rank_failure, OnRankFailure::KillAll);
  EXPECT_EQ(parse({"--on-rank-failure", "master-decides", "-n", "2", "p"}).options.on_rank_failure,
            OnRankFailure::MasterDecides);
  EXPECT_NE(help_text().find("--on-rank-failure auto|kill-all|master-decides"), std::string::npos);
}

TEST(ThdrunOptions, HelpAndVersionNeedNothingElse) {
  EXPECT_EQ(parse({"--help"}).action, Action::Help);
  EXPECT_EQ(parse({"-h"}).action, Action::Help);
  EXPECT_EQ(parse({"-n", "2", "--version"}).action, Action::Version);
  EXPECT_EQ(parse({"-V"}).action, Action::Version);
  // After the program, --help is the program's.
  ParsedArgs p = parse({"-n", "2", "prog", "--help"});
  EXPECT_EQ(p.action, Action::Run);
  EXPECT_EQ(p.options.command, (Args{"prog", "--help"}));

  EXPECT_NE(help_text().find("--timeout-kill"), std::string::npos);
  EXPECT_NE(help_text().find(usage_line()), std::string::npos);
  EXPECT_EQ(version_text(), std::string("thdrun (thd) ") + THD_VERSION_STRING);
}

TEST(ThdrunOptions, HelpSaysBothInitCallsReadTheBackend) {
  const std::string help = help_text();
  const size_t backend = help.find("--backend NAME");
  ASSERT_NE(backend, std::string::npos);
  const size_t next = help.find("\n  --", backend + 1);
  const std::string entry = help.substr(backend, next - backend);
  EXPECT_NE(entry.find("THD_BACKEND"), std::string::npos) << entry;
  EXPECT_NE(entry.find("init_master_worker"), std::string::npos) << entry;
  EXPECT_NE(entry.find("init_process_group"), std::string::npos) << entry;
}

struct BadArgs {
  Args args;
  const char* message;
};

class ThdrunBadOptions : public ::testing::TestWithParam<BadArgs> {};

TEST_P(ThdrunBadOptions, NameWhatIsWrong) {
  THD_EXPECT_THROW_MSG(parse(GetParam().args), ValueError, GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ThdrunBadOptions,
    ::testing::Values(BadArgs{{}, "no program to run"}, BadArgs{{"-n", "2"}, "no program to run"},
                      BadArgs{{"prog"}, "missing -n N"},
                      BadArgs{{"-n", "0", "p"}, "-n expects a number of processes from 1 to 1024, got '0'"},
                      BadArgs{{"-n", "abc", "p"}, "got 'abc'"}, BadArgs{{"-n", "3x", "p"}, "got '3x'"},
                      BadArgs{{"--nproc=1025", "p"}, "--nproc expects a number of processes"},
                      BadArgs{{"-n"}, "option -n needs a value"},
                      BadArgs{{"-n", "1", "--master-port", "70000", "p"}, "--master-port expects a TCP port"},
                      BadArgs{{"-n", "1", "--master-port", "0", "p"}, "got '0'"},
                      BadArgs{{"-n", "1", "--master-addr=", "p"}, "--master-addr expects a host"},
                      BadArgs{{"-n", "1", "--timeout-kill", "-1", "p"}, "--timeout-kill expects seconds"},
                      BadArgs{{"-n", "1", "--timeout-kill", "nan", "p"}, "got 'nan'"},
                      BadArgs{{"-n", "1", "--timeout-kill", "1e9", "p"}, "got '1e9'"},
                      BadArgs{{"--bogus", "-n", "1", "p"}, "unknown option '--bogus'"},
                      BadArgs{{"-x", "p"}, "unknown option '-x'"},
                      BadArgs{{"-n", "1", "--nproc", "2", "p"}, "option --nproc is given twice"},
                      BadArgs{{"--tag-output=yes", "-n", "1", "p"}, "option --tag-output takes no value"},
                      BadArgs{{"-n", "1", "--", ""}, "the program name is empty"},
                      BadArgs{{"--on-rank-failure", "master", "-n", "2", "p"},
                              "--on-rank-failure takes auto, kill-all or master-decides, got 'master'"},
                      BadArgs{{"--pool", "-n", "2", "--on-rank-failure", "kill-all"},
                              "--on-rank-failure is for a job's ranks"}));

}  // namespace
}  // namespace thd::launch
