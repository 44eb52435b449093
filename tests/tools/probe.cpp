// thdrun_probe: the program thdrun's tests launch. Its arguments are steps, run in
// order; every line it prints is written at once with write(2), so nothing waits
// in a stdio buffer when the test reads it or a signal ends the process.
//
//   env                 "env rank=R world=W local_rank=L local_world=LW addr=A port=P
//                        token_file=F token=set|unset pid=N pgid=G"
//   ready               "ready rank=R pid=N"
//   exit CODE           exit with CODE now
//   sleep SECONDS       sleep (decimals allowed)
//   raise SIG           die by SIG (TERM, KILL, ...) with its default action
//   ignore SIG          ignore SIG from here on
//   trap                catch INT, TERM, HUP and QUIT for wait-signal and no-signal
//   wait-signal SECONDS "rank R got SIGX" when one arrives; exit 1 if none comes
//   no-signal SECONDS   exit 1 if one of the trapped signals arrives within SECONDS
//   token               check THD_AUTH_TOKEN_FILE as the DataChannel reads it, plus
//                        what thdrun promises (0600 file of 64 hex digits in a 0700
//                        directory); "token dir=D"; exit 1 with the reason otherwise
//   rendezvous          thd::rendezvous("env://") and a barrier through its store;
//                        "rendezvous rank=R world=W"
//   bind                listen on MASTER_ADDR:MASTER_PORT; "bound port=P"
//   stdin               "stdin rank=R text=T": what stdin holds, newlines dropped
//   print TEXT          TEXT and a newline on stdout; eprint: on stderr
//   print-partial TEXT  TEXT without a newline on stdout
//   master-worker       write "master-worker" into THD_JOB_MODE_FILE, as
//                        init_master_worker does on rank 0 (master/job_mode.h)
//   @R / @!R            run the next step only on rank R / on every rank but R
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <thd/store.h>

#include "datachannel/net/auth.h"

namespace {

int g_rank = -1;

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

void write_line(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

void say(const std::string& line) { write_line(1, line + "\n"); }

[[noreturn]] void fail(const std::string& why) {
  write_line(2, "probe rank " + std::to_string(g_rank) + ": " + why + "\n");
  std::_Exit(1);
}

int signal_number(const std::string& name) {
  for (int sig = 1; sig < NSIG; ++sig) {
    const char* abbrev = ::sigabbrev_np(sig);
    if (abbrev != nullptr && name == abbrev) return sig;
  }
  fail("unknown signal name '" + name + "'");
}

void sleep_seconds(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// The trapped signals arrive as bytes on a pipe: a handler, not sigwait(), since
// the probe has threads it did not start (OpenBLAS) that would otherwise take a
// signal with its default action.
int g_trap_pipe[2] = {-1, -1};

extern "C" void on_trapped(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  ssize_t ignored = ::write(g_trap_pipe[1], &byte, 1);
  (void)ignored;
}

void trap() {
  if (::pipe(g_trap_pipe) != 0) fail("pipe failed");
  struct sigaction act {};
  act.sa_handler = on_trapped;
  act.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::sigaction(sig, &act, nullptr);
}

// The next trapped signal within `seconds`, 0 if none.
int next_trapped(double seconds) {
  if (g_trap_pipe[0] < 0) fail("wait-signal and no-signal need trap first");
  pollfd p{g_trap_pipe[0], POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(seconds * 1000));
  } while (r < 0 && errno == EINTR);
  unsigned char byte = 0;
  if (r <= 0 || ::read(g_trap_pipe[0], &byte, 1) != 1) return 0;
  return byte;
}

void check_token() {
  const char* path = std::getenv("THD_AUTH_TOKEN_FILE");
  if (path == nullptr) fail("THD_AUTH_TOKEN_FILE is not set");
  if (std::getenv("THD_AUTH_TOKEN") != nullptr) fail("THD_AUTH_TOKEN is set next to the file");
  // What the DataChannel does with it: this throws for a bad mode, owner or content.
  thd::net::AuthToken token = thd::net::resolve_auth_token(std::nullopt, "probe");
  if (token.bytes().size() != 64) fail("the token is " + std::to_string(token.bytes().size()) + " bytes, not 64");
  for (uint8_t c : token.bytes()) {
    if (!std::isxdigit(c)) fail("the token is not hex");
  }
  struct stat st {};
  if (::lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 07777) != 0600) {
    fail("the token file is not a regular file of mode 0600");
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || (st.st_mode & 07777) != 0700) {
    fail("the token directory " + dir + " is not of mode 0700");
  }
  say("token dir=" + dir);
}

void rendezvous() {
  thd::RendezvousResult r = thd::rendezvous("env://", -1, -1, std::chrono::seconds(10));
  // Rank 0 hosts the store: it stays until every rank has said it is done with it.
  r.store->set("done/" + std::to_string(r.rank), "1");
  if (r.rank == 0) {
    std::vector<std::string> keys;
    for (int i = 0; i < r.world_size; ++i) keys.push_back("done/" + std::to_string(i));
    r.store->wait(keys, std::chrono::seconds(10));
  }
  say("rendezvous rank=" + std::to_string(r.rank) + " world=" + std::to_string(r.world_size));
}

void bind_master_port() {
  const std::string addr = env_or("MASTER_ADDR", "");
  const int port = std::atoi(env_or("MASTER_PORT", "0").c_str());
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (fd < 0 || ::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 1) != 0) {
    fail("cannot listen on " + addr + ":" + std::to_string(port) + ": " + std::strerror(errno));
  }
  say("bound port=" + std::to_string(port));
  ::close(fd);
}

// How many arguments a step takes (for skipping a guarded one).
size_t arg_count(const std::string& step) {
  for (const char* s : {"exit", "sleep", "raise", "ignore", "wait-signal", "no-signal", "print", "eprint", "print-partial"}) {
    if (step == s) return 1;
  }
  return 0;
}

// Runs one step starting at args[i]; returns the index after it.
size_t run_step(const std::vector<std::string>& args, size_t i) {
  const std::string& step = args[i];
  auto arg = [&](size_t k) -> const std::string& {
    if (i + k >= args.size()) fail("step '" + step + "' needs an argument");
    return args[i + k];
  };
  const std::string rank = std::to_string(g_rank);
  if (step == "env") {
    say("env rank=" + env_or("RANK", "-") + " world=" + env_or("WORLD_SIZE", "-") +
        " local_rank=" + env_or("LOCAL_RANK", "-") + " local_world=" + env_or("LOCAL_WORLD_SIZE", "-") +
        " addr=" + env_or("MASTER_ADDR", "-") + " port=" + env_or("MASTER_PORT", "-") +
        " token_file=" + env_or("THD_AUTH_TOKEN_FILE", "-") +
        " token=" + (std::getenv("THD_AUTH_TOKEN") != nullptr ? "set" : "unset") +
        " pid=" + std::to_string(::getpid()) + " pgid=" + std::to_string(::getpgrp()));
    return i + 1;
  }
  if (step == "ready") {
    say("ready rank=" + rank + " pid=" + std::to_string(::getpid()));
    return i + 1;
  }
  if (step == "exit") std::_Exit(std::atoi(arg(1).c_str()));
  if (step == "sleep") {
    sleep_seconds(std::atof(arg(1).c_str()));
    return i + 2;
  }
  if (step == "raise") {
    const int sig = signal_number(arg(1));
    ::signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    ::sigprocmask(SIG_UNBLOCK, &one, nullptr);
    ::raise(sig);
    fail("still alive after raising " + arg(1));
  }
  if (step == "ignore") {
    ::signal(signal_number(arg(1)), SIG_IGN);
    return i + 2;
  }
  if (step == "trap") {
    trap();
    return i + 1;
  }
  if (step == "wait-signal") {
    const int sig = next_trapped(std::atof(arg(1).c_str()));
    if (sig == 0) fail("no signal within " + arg(1) + " s");
    say("rank " + rank + " got SIG" + ::sigabbrev_np(sig));
    return i + 2;
  }
  if (step == "no-signal") {
    const int sig = next_trapped(std::atof(arg(1).c_str()));
    if (sig != 0) fail(std::string("got SIG") + ::sigabbrev_np(sig) + " again");
    return i + 2;
  }
  if (step == "token") {
    check_token();
    return i + 1;
  }
  if (step == "rendezvous") {
    rendezvous();
    return i + 1;
  }
  if (step == "master-worker") {
    const char* path = std::getenv("THD_JOB_MODE_FILE");
    if (path == nullptr) fail("THD_JOB_MODE_FILE is not set");
    FILE* f = std::fopen(path, "w");
    if (f == nullptr || std::fputs("master-worker\n", f) < 0 || std::fclose(f) != 0) {
      fail(std::string("cannot write ") + path);
    }
    return i + 1;
  }
  if (step == "bind") {
    bind_master_port();
    return i + 1;
  }
  if (step == "stdin") {
    std::string text;
    char buf[256];
    for (ssize_t n; text.size() < 4096 && (n = ::read(0, buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
    std::erase(text, '\n');
    say("stdin rank=" + rank + " text=" + text);
    return i + 1;
  }
  if (step == "print") {
    say(arg(1));
    return i + 2;
  }
  if (step == "eprint") {
    write_line(2, arg(1) + "\n");
    return i + 2;
  }
  if (step == "print-partial") {
    write_line(1, arg(1));
    return i + 2;
  }
  fail("unknown step '" + step + "'");
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  g_rank = std::atoi(env_or("RANK", "-1").c_str());
  try {
    for (size_t i = 0; i < args.size();) {
      const std::string& a = args[i];
      if (a.starts_with("@")) {  // a guard on the next step
        const bool negate = a.starts_with("@!");
        const int r = std::atoi(a.c_str() + (negate ? 2 : 1));
        if (i + 1 >= args.size()) fail("guard '" + a + "' has no step after it");
        const bool run = negate ? g_rank != r : g_rank == r;
        i = run ? run_step(args, i + 1) : i + 2 + arg_count(args[i + 1]);
        continue;
      }
      i = run_step(args, i);
    }
  } catch (const std::exception& e) {
    fail(e.what());
  }
  return 0;
}
