#include "pool_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "test_util.h"

extern char** environ;

namespace thd::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kStopGrace{5000};
constexpr std::chrono::milliseconds kPollStep{5};

std::vector<std::string> environment_with(const EnvChanges& changes) {
  EnvChanges all = {{"THD_AUTH_TOKEN", std::nullopt}, {"THD_AUTH_TOKEN_FILE", std::nullopt}};
  all.insert(all.end(), changes.begin(), changes.end());
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (const auto& [name, value] : all) {
    std::erase_if(env, [&](const std::string& entry) { return entry.starts_with(name + "="); });
    if (value) env.push_back(name + "=" + *value);
  }
  return env;
}

}  // namespace

std::string worker_path() { return THD_TEST_WORKER; }
std::string pool_master_path() { return THD_TEST_POOL_MASTER; }
std::string pool_thdrun_path() { return THD_TEST_THDRUN; }

TestProcess::TestProcess(std::vector<std::string> argv_s, const EnvChanges& env, int stop_signal)
    : stop_signal_(stop_signal) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "thd_pool_test_XXXXXX").string();
  const int out = ::mkstemp(tmpl.data());
  if (out < 0) throw std::runtime_error("mkstemp failed");
  output_file_ = tmpl;

  // Everything the child needs exists before fork: it only dup2s and execs.
  std::vector<std::string> env_s = environment_with(env);
  std::vector<char*> argv, envp;
  for (auto& s : argv_s) argv.push_back(s.data());
  for (auto& s : env_s) envp.push_back(s.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  const int dev_null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);

  pid_ = ::fork();
  if (pid_ < 0) {
    ::close(out);
    ::close(dev_null);
    throw std::runtime_error("fork failed");
  }
  if (pid_ == 0) {
    ::dup2(dev_null, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(126);
  }
  ::close(out);
  ::close(dev_null);
}

TestProcess::~TestProcess() {
  if (running()) {
    signal(stop_signal_);
    if (wait(kStopGrace) < 0) {
      signal(SIGKILL);
      wait(kStopGrace);
    }
  }
  std::error_code ec;
  std::filesystem::remove(output_file_, ec);
}

bool TestProcess::running() {
  if (status_) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  } else if (r < 0 && errno == ECHILD) {
    status_ = -2;  // reaped elsewhere: nothing left to stop
  }
  return !status_;
}

std::string TestProcess::output() const {
  std::ifstream in(output_file_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool TestProcess::wait_for_output(const std::string& text, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const bool alive = running();
    if (output().find(text) != std::string::npos) return true;
    if (!alive || Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPollStep);
  }
}

int TestProcess::wait(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (running()) {
    if (Clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(kPollStep);
  }
  return *status_;
}

void TestProcess::signal(int sig) const {
  if (!status_) ::kill(pid_, sig);
}

PoolUnderTest::PoolUnderTest(int nodes, std::vector<std::string> extra_args, const EnvChanges& env) {
  std::vector<std::string> argv = {pool_thdrun_path(), "--pool", "-n", std::to_string(nodes), "--listen",
                                   "127.0.0.1:0",      "--timeout-kill", "2"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  EnvChanges all{{"THD_AUTH_TOKEN", kToken}};
  all.insert(all.end(), env.begin(), env.end());
  thdrun_.emplace(std::move(argv), all, SIGTERM);
  if (!thdrun_->wait_for_output("thdrun: pool ready", kLong)) {
    throw std::runtime_error("the pool did not come up:\n" + thdrun_->output());
  }
  auto address = find_after(thdrun_->output(), "thdrun: worker pool");
  if (!address) throw std::runtime_error("thdrun printed no address:\n" + thdrun_->output());
  url_ = address->substr(0, address->find(' '));
}

std::vector<pid_t> PoolUnderTest::worker_pids() const {
  std::vector<pid_t> pids;
  const std::string dir = "/proc/" + std::to_string(thdrun_->pid()) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(task.path() / "children");
    pid_t pid;
    while (in >> pid) pids.push_back(pid);
  }
  return pids;
}

int node_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::vector<std::string> args;
  for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--node") return std::stoi(args[i + 1]);
  }
  return -1;
}

int64_t resident_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("VmRSS:")) return std::stoll(line.substr(6)) * 1024;  // "VmRSS:   1234 kB"
  }
  return -1;
}

std::optional<std::string> find_after(const std::string& text, const std::string& key) {
  const std::string needle = key + ": ";
  const size_t at = text.find(needle);
  if (at == std::string::npos) return std::nullopt;
  const size_t begin = at + needle.size();
  return text.substr(begin, text.find('\n', begin) - begin);
}

}  // namespace thd::test
