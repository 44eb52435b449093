#include "tools/thdrun/process_watch.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include "tensor/check.h"

namespace thd::launch {

void WatchedProcess::finish_output() {
  for (TaggedOutput& out : outputs) out.finish();
}

WatchedProcess start_watched(ProcessSpec spec, const SignalEvents& signals, const std::optional<std::string>& tag) {
  WatchedProcess started;
  std::optional<Pipe> out, err;  // the write ends close when this returns: the child has its own
  if (tag) {
    out = make_pipe();
    err = make_pipe();
    spec.stdout_fd = out->write.get();
    spec.stderr_fd = err->write.get();
    started.outputs.emplace_back(*tag, std::move(out->read), STDOUT_FILENO);
    started.outputs.emplace_back(*tag, std::move(err->read), STDERR_FILENO);
  }
  started.process = spawn(spec, signals);
  return started;
}

std::string seconds_text(std::chrono::milliseconds ms) {
  return fmt::format("{:g} s", static_cast<double>(ms.count()) / 1000.0);
}

ProcessWatch::ProcessWatch(SignalEvents& signals, std::chrono::milliseconds kill_grace, std::string what)
    : signals_(signals), kill_grace_(kill_grace), what_(std::move(what)) {}

std::optional<ProcessWatch::Exit> ProcessWatch::reap_one() {
  int status = 0;
  const pid_t pid = ::waitpid(-1, &status, WNOHANG);
  if (pid <= 0) return std::nullopt;  // 0: none has exited; -1 (ECHILD): no children at all
  return Exit{pid, status};
}

void ProcessWatch::watch_output(WatchedProcess& p) {
  for (TaggedOutput& out : p.outputs) {
    if (!out.open()) continue;
    fds_.push_back(pollfd{out.fd(), POLLIN, 0});
    readers_.push_back(&out);
  }
}

bool ProcessWatch::poll(std::optional<Clock::time_point> until) {
  int timeout_ms = -1;
  if (until) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*until - Clock::now());
    timeout_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
  }
  if (::poll(fds_.data(), fds_.size(), timeout_ms) >= 0) return true;
  THD_CHECK(errno == EINTR, Error, "thdrun", "poll failed while supervising {}: {}", what_,
            std::system_category().message(errno));
  return false;
}

void ProcessWatch::pump_ready() {
  for (size_t i = 0; i < readers_.size(); ++i) {
    if (fds_[i + 1].revents != 0) readers_[i]->pump();
  }
}

bool ProcessWatch::second_sigint(int sig) {
  if (sig != SIGINT) return false;
  if (sigint_seen_) return true;
  sigint_seen_ = true;
  return false;
}

}  // namespace thd::launch
