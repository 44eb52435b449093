#include "tools/thdrun/tagged_output.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

#include "tensor/check.h"

namespace thd::launch {
namespace {

// A blocked stdout reader (a paused pager) stalls the launcher here at most this
// long per write before the output is dropped; supervision must go on.
constexpr int kWriteStallTimeoutMs = 10000;

}  // namespace

Pipe make_pipe() {
  int fds[2];
  THD_CHECK(::pipe2(fds, O_CLOEXEC) == 0, Error, "thdrun", "cannot create a pipe: {}",
            std::system_category().message(errno));
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

TaggedOutput::TaggedOutput(std::string prefix, UniqueFd read_end, int out_fd)
    : prefix_(std::move(prefix)), pipe_(std::move(read_end)), out_fd_(out_fd) {
  const int flags = ::fcntl(pipe_.get(), F_GETFL);
  if (flags >= 0) ::fcntl(pipe_.get(), F_SETFL, flags | O_NONBLOCK);
}

void TaggedOutput::pump() {
  if (!open()) return;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(pipe_.get(), buf, sizeof buf);
    if (n > 0) {
      pending_.append(buf, static_cast<size_t>(n));
      emit_lines(false);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // End of file, or a read error that no retry fixes.
    emit_lines(true);
    pipe_.reset();
    return;
  }
}

void TaggedOutput::finish() {
  pump();
  if (!open()) return;
  emit_lines(true);
  pipe_.reset();
}

void TaggedOutput::emit_lines(bool flush_partial) {
  std::string out;
  size_t start = 0;
  for (;;) {
    size_t nl = pending_.find('\n', start);
    if (nl == std::string::npos) {
      const size_t left = pending_.size() - start;
      if (left == 0 || (!flush_partial && left < kMaxTaggedLine)) break;
      const size_t take = std::min(left, kMaxTaggedLine);
      out += prefix_;
      out.append(pending_, start, take);
      out += '\n';
      start += take;
      continue;
    }
    out += prefix_;
    out.append(pending_, start, nl + 1 - start);
    start = nl + 1;
  }
  pending_.erase(0, start);
  if (!out.empty()) write_out(out);
}

void TaggedOutput::write_out(const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(out_fd_, text.data() + done, text.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Our stdout was handed to us nonblocking: wait for room, within reason.
      pollfd p{out_fd_, POLLOUT, 0};
      if (::poll(&p, 1, kWriteStallTimeoutMs) > 0) continue;
    }
    return;  // EPIPE (the reader is gone) or stalled: drop this output, keep supervising
  }
}

}  // namespace thd::launch
