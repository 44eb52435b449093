#include "local_job.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include <thd/distributed.h>
#include <thd/error.h>

#include "datachannel/test_util.h"
#include "datachannel/transport.h"

extern char** environ;

namespace thd::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kStillRunning = -2;

std::string this_executable() {
  char path[4096];
  const ssize_t len = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (len <= 0) throw std::runtime_error("readlink /proc/self/exe failed");
  path[len] = '\0';
  return path;
}

// The environment of worker `rank`: ours, with the job's variables replaced.
std::vector<std::string> worker_environment(int rank, int world_size, uint16_t port) {
  static const char* const kJobVariables[] = {"MASTER_ADDR", "MASTER_PORT",    "RANK",
                                              "WORLD_SIZE",  "THD_AUTH_TOKEN", "THD_AUTH_TOKEN_FILE"};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const char* name : kJobVariables) replaced = replaced || entry.starts_with(std::string(name) + "=");
    if (!replaced) env.push_back(entry);
  }
  env.push_back("MASTER_ADDR=127.0.0.1");
  env.push_back("MASTER_PORT=" + std::to_string(port));
  env.push_back("RANK=" + std::to_string(rank));
  env.push_back("WORLD_SIZE=" + std::to_string(world_size));
  env.push_back(std::string("THD_AUTH_TOKEN=") + kToken);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// Run by exit() in a test worker, before the libraries' own exit handlers: a
// worker must have destroyed its DataChannel by then (master/init.cpp), else its
// progress thread races those handlers. Exit status 4 makes every job fail.
void check_no_transport_alive_at_exit() {
  const int alive = detail::Transport::live_count();
  if (alive == 0) return;
  std::fprintf(stderr, "test worker (pid %d): exiting with %d DataChannel transport(s) alive\n", ::getpid(), alive);
  std::fflush(nullptr);
  ::_exit(4);
}

}  // namespace

void run_worker_if_asked(int argc, char** argv) {
  bool asked = false;
  for (int i = 1; i < argc; ++i) asked = asked || std::strcmp(argv[i], kWorkerFlag) == 0;
  if (!asked) return;
  int code = 3;
  std::atexit(check_no_transport_alive_at_exit);
  try {
    MasterWorkerOptions options;
    options.timeout = LocalJob::kTimeout;
    init_master_worker(options);  // env:// from the environment LocalJob gave us
    std::fprintf(stderr, "test worker (pid %d): init_master_worker returned on a worker rank\n", ::getpid());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "test worker (pid %d): %s\n", ::getpid(), e.what());
    code = 2;
  }
  std::fflush(nullptr);
  ::_exit(code);
}

std::string JobEnd::problems() const {
  std::string out;
  if (shutdown_error) out += "thd::shutdown() threw: " + describe(shutdown_error) + "; ";
  for (size_t node = 0; node < worker_exit_codes.size(); ++node) {
    const int c = worker_exit_codes[node];
    if (c == 0) continue;
    out += "worker of node " + std::to_string(node) + " ";
    if (c == -1) {
      out += "did not exit within the grace period (killed); ";
    } else if (c > 128) {
      out += "was killed by signal " + std::to_string(c - 128) + "; ";
    } else {
      out += "exited " + std::to_string(c) + "; ";
    }
  }
  return out;
}

LocalJob::LocalJob(int workers, MasterWorkerOptions options) : workers_(workers), options_(std::move(options)) {
  // free_port() cannot reserve the port: another process may take it before the
  // master binds it, so a failed bind gets a second and third port.
  for (int attempt = 1;; ++attempt) {
    try {
      start(free_port());
      return;
    } catch (const ConnectionError&) {
      if (attempt == 3) throw;
    }
  }
}

void LocalJob::start(uint16_t port) {
  const int world_size = workers() + 1;
  std::vector<std::string> argv_strings = {this_executable(), kWorkerFlag};
  std::vector<char*> argv = c_strings(argv_strings);
  const pid_t parent = ::getpid();
  pids_.clear();
  exit_codes_.clear();
  for (int node = 0; node < workers(); ++node) {
    std::vector<std::string> env_strings = worker_environment(node + 1, world_size, port);
    std::vector<char*> envp = c_strings(env_strings);
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      kill_and_reap_all();
      throw std::runtime_error("fork failed");
    }
    if (pid == 0) {
      // Only async-signal-safe calls between fork and exec: the master has threads.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(126);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    pids_.push_back(pid);
    exit_codes_.push_back(kStillRunning);
  }
  try {
    MasterWorkerOptions options = options_;
    options.init_method = "tcp://127.0.0.1:" + std::to_string(port);
    options.world_size = world_size;
    options.rank = 0;
    options.timeout = kTimeout;
    options.token = std::string(kToken);
    init_master_worker(options);
  } catch (...) {
    kill_and_reap_all();
    throw;
  }
}

LocalJob::~LocalJob() { stop(); }

void LocalJob::kill_worker(int node) {
  const size_t i = static_cast<size_t>(node);
  if (exit_codes_.at(i) != kStillRunning) return;
  ::kill(pids_[i], SIGKILL);
  int status = 0;
  ::waitpid(pids_[i], &status, 0);
  exit_codes_[i] = exit_code_of(status);
}

const JobEnd& LocalJob::stop() {
  if (stopped_) return end_;
  stopped_ = true;
  try {
    shutdown();
  } catch (...) {
    end_.shutdown_error = std::current_exception();
  }
  const auto deadline = Clock::now() + kExitGrace;
  for (size_t i = 0; i < pids_.size(); ++i) {
    while (exit_codes_[i] == kStillRunning) {
      int status = 0;
      if (::waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
        exit_codes_[i] = exit_code_of(status);
      } else if (Clock::now() >= deadline) {
        ::kill(pids_[i], SIGKILL);
        ::waitpid(pids_[i], &status, 0);
        exit_codes_[i] = -1;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
  }
  end_.worker_exit_codes = exit_codes_;
  return end_;
}

void LocalJob::kill_and_reap_all() {
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (exit_codes_[i] != kStillRunning) continue;
    ::kill(pids_[i], SIGKILL);
    int status = 0;
    ::waitpid(pids_[i], &status, 0);
    exit_codes_[i] = exit_code_of(status);
  }
}

size_t resident_bytes(pid_t pid) {
  const std::string path = pid == 0 ? "/proc/self/status" : "/proc/" + std::to_string(pid) + "/status";
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("VmRSS:")) continue;
    std::istringstream fields(line.substr(6));
    size_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  throw std::runtime_error("no VmRSS in " + path);
}

}  // namespace thd::test
