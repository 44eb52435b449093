#include "thdrun_runner.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace thd::test {
namespace {

using Clock = std::chrono::steady_clock;

void become_subreaper() {
  static const bool done = [] {
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) throw std::runtime_error("PR_SET_CHILD_SUBREAPER failed");
    return true;
  }();
  (void)done;
}

std::vector<std::string> thdrun_environment(const ThdrunRun& run, const std::string& tmpdir) {
  std::vector<std::pair<std::string, std::optional<std::string>>> changes = {
      {"THD_AUTH_TOKEN", std::nullopt}, {"THD_AUTH_TOKEN_FILE", std::nullopt}, {"TMPDIR", tmpdir}};
  changes.insert(changes.end(), run.env.begin(), run.env.end());
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (const auto& [name, value] : changes) {
    std::erase_if(env, [&](const std::string& entry) { return entry.starts_with(name + "="); });
    if (value) env.push_back(name + "=" + *value);
  }
  return env;
}

// Every process whose parent is this one (the test runs no other children).
std::vector<pid_t> my_children() {
  std::vector<pid_t> pids;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return pids;
  while (dirent* t = ::readdir(tasks)) {
    if (t->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + t->d_name + "/children");
    pid_t pid;
    while (in >> pid) pids.push_back(pid);
  }
  ::closedir(tasks);
  return pids;
}

// Reaps `pid` if it ends before the deadline; true if it did.
bool reap_by(pid_t pid, Clock::time_point deadline, int* status) {
  for (;;) {
    pid_t r = ::waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) return true;  // not ours any more
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

std::vector<Leftover> collect_leftovers(std::chrono::milliseconds grace) {
  std::vector<Leftover> out;
  const auto deadline = Clock::now() + grace;
  for (pid_t pid : my_children()) {
    Leftover l;
    l.pid = pid;
    if (!reap_by(pid, deadline, &l.wait_status)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &l.wait_status, 0);
      l.killed_by_runner = true;
    }
    out.push_back(l);
  }
  return out;
}

enum class Read { Data, Again, Eof };

// Reads what `fd` has now into `text` and reports the complete lines.
Read read_some(int fd, int stream, std::string& text, size_t& reported, const ThdrunRun& run, pid_t pid) {
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0) return errno == EINTR || errno == EAGAIN ? Read::Again : Read::Eof;
  if (n == 0) return Read::Eof;
  text.append(buf, static_cast<size_t>(n));
  for (size_t nl; (nl = text.find('\n', reported)) != std::string::npos; reported = nl + 1) {
    if (run.on_line) run.on_line(stream, text.substr(reported, nl - reported), pid);
  }
  return Read::Data;
}

}  // namespace

std::string thdrun_path() { return THD_TEST_THDRUN; }
std::string probe_path() { return THD_TEST_PROBE; }

ThdrunRun probe_run(std::vector<std::string> thdrun_args, const std::vector<std::string>& steps) {
  ThdrunRun run;
  run.args = std::move(thdrun_args);
  run.args.push_back(probe_path());
  run.args.insert(run.args.end(), steps.begin(), steps.end());
  return run;
}

std::vector<std::string> ThdrunResult::out_lines() const {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string describe(const ThdrunResult& r) {
  return "thdrun status " + std::to_string(r.status) + (r.timed_out ? " (timed out)" : "") + "\n--- stdout:\n" +
         r.out + "--- stderr:\n" + r.err;
}

ThdrunResult run_thdrun(const ThdrunRun& run) {
  become_subreaper();
  std::vector<std::string> argv_s = {thdrun_path()};
  argv_s.insert(argv_s.end(), run.args.begin(), run.args.end());
  ThdrunResult result;
  std::string tmpl = (std::filesystem::temp_directory_path() / "thdrun_test_XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  result.tmpdir = tmpl;
  std::vector<std::string> env_s = thdrun_environment(run, result.tmpdir);
  std::vector<char*> argv, envp;
  for (auto& s : argv_s) argv.push_back(s.data());
  for (auto& s : env_s) envp.push_back(s.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);

  int out_pipe[2], err_pipe[2], in_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0 || ::pipe2(in_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe2");
  }
  if (run.stdin_text) {
    // Small enough for the pipe's buffer: written whole before thdrun starts.
    if (::write(in_pipe[1], run.stdin_text->data(), run.stdin_text->size()) !=
        static_cast<ssize_t>(run.stdin_text->size())) {
      throw std::runtime_error("writing stdin");
    }
  }
  ::close(in_pipe[1]);
  const auto start = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(run.stdin_text ? in_pipe[0] : ::open("/dev/null", O_RDONLY), 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(126);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(in_pipe[0]);

  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  size_t reported[2] = {0, 0};
  std::string* text[2] = {&result.out, &result.err};
  bool exited = false;
  int status = 0;
  const auto deadline = start + run.timeout;
  while (!exited) {
    ::poll(fds, 2, 20);
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0 && fds[i].revents != 0 &&
          read_some(fds[i].fd, i + 1, *text[i], reported[i], run, pid) == Read::Eof) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
      }
    }
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      // Whatever thdrun wrote is in the pipes now; a leftover process holding them
      // open must not keep this loop waiting for an end of file.
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0) continue;
        ::fcntl(fds[i].fd, F_SETFL, O_NONBLOCK);
        while (read_some(fds[i].fd, i + 1, *text[i], reported[i], run, pid) == Read::Data) {
        }
        ::close(fds[i].fd);
        fds[i].fd = -1;
      }
    } else if (!result.timed_out && Clock::now() >= deadline) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);  // its ranks follow through PR_SET_PDEATHSIG
    }
  }
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  if (!result.timed_out) {
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  result.leftovers = collect_leftovers(run.orphan_grace);
  for (const auto& entry : std::filesystem::directory_iterator(result.tmpdir)) {
    result.tmpdir_leftovers.push_back(entry.path().filename().string());
  }
  std::error_code ec;
  std::filesystem::remove_all(result.tmpdir, ec);
  return result;
}

ThdrunResult run_thdrun_checked(const ThdrunRun& run) {
  ThdrunResult result = run_thdrun(run);
  EXPECT_FALSE(result.timed_out) << describe(result);
  EXPECT_TRUE(result.leftovers.empty()) << result.leftovers.size() << " processes outlived thdrun\n"
                                        << describe(result);
  // The token directory is gone, whichever way thdrun ended.
  EXPECT_TRUE(result.tmpdir_leftovers.empty()) << result.tmpdir_leftovers.front() << "\n" << describe(result);
  return result;
}

}  // namespace thd::test
