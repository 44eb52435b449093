// Helpers for the DataChannel tests: temporary directories, free ports, forked
// children that are always reaped, and a check on an exception's type and message.
#pragma once

#include <gtest/gtest.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <poll.h>

#include <thd/error.h>

#include "datachannel/net/socket.h"
#include "expect_throw.h"

namespace thd::test {

inline constexpr const char* kToken = "unit-test-token-5f2c";

// Short timeouts keep the failure cases fast; long enough for a loaded CI machine.
inline constexpr std::chrono::milliseconds kShort{300};
inline constexpr std::chrono::milliseconds kLong{10000};

inline net::Deadline in(std::chrono::milliseconds ms) { return net::deadline_after(ms); }

// Text for failure messages (the test binaries do not link fmt).
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// Runs body(rank) on `world` threads at once and joins them all; what each rank
// threw, by rank (nullptr for ranks that finished).
inline std::vector<std::exception_ptr> run_rank_threads(int world, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// True once the far end has closed `s`: reads (and discards) until EOF or an error.
inline bool closed_by_peer(net::Socket& s, std::chrono::milliseconds within = kLong) {
  const auto deadline = in(within);
  uint8_t buf[256];
  for (;;) {
    net::IoResult r = s.recv_some(buf);
    if (r.status == net::IoResult::Status::Eof || r.status == net::IoResult::Status::Error) return true;
    if (r.status == net::IoResult::Status::WouldBlock) {
      pollfd p{s.fd(), POLLIN, 0};
      if (::poll(&p, 1, net::poll_timeout_ms(deadline)) == 0) return false;
    }
  }
}

// A fresh directory, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "thd_dc_test_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A port nothing listens on right now: bind an ephemeral one and let it go. For the
// tests that must name a port before its server exists (a client that starts
// first, rendezvous where rank 0 binds the address the others were given).
inline uint16_t free_port() {
  net::Socket s = net::Socket::listen("127.0.0.1", 0, "test.free_port");
  return s.local_port();
}

// Forked children, killed and reaped when this goes out of scope, so a failing
// test never leaves processes behind.
class Children {
 public:
  Children() = default;
  Children(const Children&) = delete;
  Children& operator=(const Children&) = delete;
  ~Children() {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      int status;
      ::waitpid(pid, &status, 0);
    }
  }

  // Runs body() in a child process whose exit code is its return value; an
  // exception is printed and exits 99. The child never returns into the test.
  pid_t spawn(const std::function<int()>& body) {
    std::fflush(nullptr);  // or buffered output would be written twice
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      int code = 98;
      try {
        code = body();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", ::getpid(), e.what());
        code = 99;
      } catch (...) {
        code = 97;
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    pids_.push_back(pid);
    return pid;
  }

  // Waits for every child; their exit codes in spawn order (128 + signal for a
  // killed one, -1 for one still running at the deadline, which is then killed).
  std::vector<int> wait_all(std::chrono::milliseconds timeout = kLong) {
    // Every child is reaped as soon as it exits, whatever its place in the list, as
    // a launcher would: a dead rank left a zombie looks alive to peers that watch
    // its process (UCX's shared-memory keepalive).
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<int> codes(pids_.size(), -1);
    std::vector<bool> reaped(pids_.size(), false);
    size_t left = pids_.size();
    while (left > 0) {
      for (size_t i = 0; i < pids_.size(); ++i) {
        if (reaped[i]) continue;
        int status = 0;
        if (::waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
          codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          reaped[i] = true;
          --left;
        }
      }
      if (left == 0) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        for (size_t i = 0; i < pids_.size(); ++i) {
          if (reaped[i]) continue;
          int status = 0;
          ::kill(pids_[i], SIGKILL);
          ::waitpid(pids_[i], &status, 0);
        }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    pids_.clear();
    return codes;
  }

 private:
  std::vector<pid_t> pids_;
};

}  // namespace thd::test
