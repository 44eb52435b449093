#include "datachannel/pipe/process_watch.h"

#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace thd::detail::pipe {

namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

template <typename T>
bool parse_number(std::string_view text, T* out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

// The raw syscall: glibc 2.36's <sys/pidfd.h> declares pidfd_open without C
// linkage for C++, and older glibcs have no wrapper at all. -1 with errno set
// (ENOSYS before Linux 5.3).
int open_pidfd(int64_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0U)); }

bool valid_boot_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-')) return false;
  }
  return true;
}

}  // namespace

std::string ProcessIdentity::encode() const {
  return fmt::format("{} {} {} {} {}", boot_id.empty() ? "-" : boot_id, pid_ns_dev, pid_ns_ino, pid, start_time);
}

std::optional<ProcessIdentity> ProcessIdentity::decode(std::string_view text) {
  std::vector<std::string_view> fields;
  while (!text.empty() && fields.size() <= 5) {
    const size_t space = text.find(' ');
    fields.push_back(text.substr(0, space));
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
  }
  if (fields.size() != 5) return std::nullopt;
  ProcessIdentity id;
  if (fields[0] != "-") {
    if (!valid_boot_id(fields[0])) return std::nullopt;
    id.boot_id = std::string(fields[0]);
  }
  if (!parse_number(fields[1], &id.pid_ns_dev) || !parse_number(fields[2], &id.pid_ns_ino) ||
      !parse_number(fields[3], &id.pid) || !parse_number(fields[4], &id.start_time) || id.pid <= 0) {
    return std::nullopt;
  }
  return id;
}

bool ProcessIdentity::shares_pid_space_with(const ProcessIdentity& other) const {
  return !boot_id.empty() && boot_id == other.boot_id && pid_ns_ino != 0 && pid_ns_dev == other.pid_ns_dev &&
         pid_ns_ino == other.pid_ns_ino;
}

std::optional<uint64_t> process_start_time(int64_t pid) {
  const std::string stat = read_first_line(fmt::format("/proc/{}/stat", pid));
  // The command name (field 2) is in parentheses and may hold spaces or ')': the
  // fields after it are counted from its last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  // Fields 3..21, then 22 (starttime).
  for (int i = 3; i <= 21; ++i) {
    if (!(rest >> field)) return std::nullopt;
  }
  uint64_t start = 0;
  if (!(rest >> field) || !parse_number(std::string_view(field), &start)) return std::nullopt;
  return start;
}

ProcessIdentity this_process() {
  ProcessIdentity id;
  const std::string boot = read_first_line("/proc/sys/kernel/random/boot_id");
  if (valid_boot_id(boot)) id.boot_id = boot;
  struct stat ns{};
  if (::stat("/proc/self/ns/pid", &ns) == 0) {
    id.pid_ns_dev = static_cast<uint64_t>(ns.st_dev);
    id.pid_ns_ino = static_cast<uint64_t>(ns.st_ino);
  }
  id.pid = ::getpid();
  id.start_time = process_start_time(id.pid).value_or(0);
  return id;
}

bool ProcessWatch::watch(int rank, const ProcessIdentity& peer) {
  if (!self_.shares_pid_space_with(peer) || peer.pid == self_.pid || peer.start_time == 0) return false;
  net::UniqueFd fd(open_pidfd(peer.pid));
  if (!fd.valid()) {
    // ESRCH: gone already (reported by the next exited()). Anything else (no
    // pidfd on this kernel, refused): not watched; the library or heartbeats tell.
    if (errno != ESRCH) return false;
    watched_.push_back({rank, peer.pid, net::UniqueFd()});
    return true;
  }
  // Opened after the check below it could name a newcomer that took a dead peer's
  // pid; opened first, a start time that still agrees proves it is the peer's.
  if (process_start_time(peer.pid) != peer.start_time) {
    // Gone (nothing readable) or someone else now: the peer it was has exited.
    watched_.push_back({rank, peer.pid, net::UniqueFd()});
    return true;
  }
  watched_.push_back({rank, peer.pid, std::move(fd)});
  return true;
}

std::vector<int> ProcessWatch::exited() {
  std::vector<int> out;
  if (watched_.empty()) return out;
  std::vector<pollfd> fds;
  fds.reserve(watched_.size());
  for (const Watched& w : watched_) fds.push_back({w.fd.valid() ? w.fd.get() : -1, POLLIN, 0});
  if (::poll(fds.data(), fds.size(), 0) < 0) {
    // EINTR or ENOMEM: nothing learnt this time; invalid entries are reported below.
    for (pollfd& f : fds) f.revents = 0;
  }
  std::vector<Watched> still;
  still.reserve(watched_.size());
  for (size_t i = 0; i < watched_.size(); ++i) {
    const bool gone = !watched_[i].fd.valid() || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
    if (gone) {
      out.push_back(watched_[i].rank);
      reported_.emplace_back(watched_[i].rank, watched_[i].pid);
    } else {
      still.push_back(std::move(watched_[i]));
    }
  }
  watched_ = std::move(still);
  return out;
}

int64_t ProcessWatch::pid_of(int rank) const noexcept {
  for (const Watched& w : watched_) {
    if (w.rank == rank) return w.pid;
  }
  for (const auto& [r, pid] : reported_) {
    if (r == rank) return pid;
  }
  return -1;
}

}  // namespace thd::detail::pipe
