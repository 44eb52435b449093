// Noticing at once that a peer process on this host has exited.
//
// Some libraries never report a peer that dies without a word (libfabric 1.17's tcp
// and shm providers drop the broken connection silently), and heartbeats can only
// call a peer lost after seconds of silence. A peer that runs on this host, in this
// pid namespace, can be watched directly: its pidfd becomes readable the moment it
// exits (a zombie counts), however it died. Each rank publishes who it is (boot,
// pid namespace, pid, start time) at set-up; PipeTransport watches the peers whose
// identity says they share its host and namespace, and falls back to the library or
// to heartbeats for the others.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "datachannel/net/fd.h"

namespace thd::detail::pipe {

struct ProcessIdentity {
  std::string boot_id;   // /proc/sys/kernel/random/boot_id: which boot of which machine
  uint64_t pid_ns_dev = 0;
  uint64_t pid_ns_ino = 0;  // /proc/self/ns/pid: which pid namespace the pid means something in
  int64_t pid = 0;
  uint64_t start_time = 0;  // /proc/PID/stat field 22: tells a reused pid apart

  // "boot_id dev ino pid start": what the store carries.
  std::string encode() const;
  // nullopt for anything malformed (a peer's bytes are not trusted).
  static std::optional<ProcessIdentity> decode(std::string_view text);
  // Same machine, same boot, same pid namespace: the pid names the same process here.
  bool shares_pid_space_with(const ProcessIdentity& other) const;
};

// This process. Fields it cannot read stay empty, and such an identity shares
// nothing with anyone (the watch is then simply not used).
ProcessIdentity this_process();
// The start time of `pid` (clock ticks since boot), nullopt when it is gone or
// unreadable.
std::optional<uint64_t> process_start_time(int64_t pid);

class ProcessWatch {
 public:
  explicit ProcessWatch(ProcessIdentity self = this_process()) : self_(std::move(self)) {}

  // Watches `peer`'s process when it shares this process's pid space and is still
  // the process it published (same start time); true if it is watched. A peer that
  // is already gone is reported by the next exited().
  bool watch(int rank, const ProcessIdentity& peer);
  // The ranks whose process exited since the last call (each reported once).
  std::vector<int> exited();
  bool empty() const noexcept { return watched_.empty(); }
  // The pid a watched (or reported) rank was published with, -1 if never watched.
  int64_t pid_of(int rank) const noexcept;

 private:
  struct Watched {
    int rank;
    int64_t pid;
    net::UniqueFd fd;  // pidfd; invalid: the process was gone when watch() looked
  };
  ProcessIdentity self_;
  std::vector<Watched> watched_;
  std::vector<std::pair<int, int64_t>> reported_;
};

}  // namespace thd::detail::pipe
