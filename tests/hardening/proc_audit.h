// What /proc shows about a job's processes: who they are, what anyone on the host
// can read of them (command lines; environments, to the same user), and which TCP
// ports they listen on, and where.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace thd::test {

// `root` and all its descendants (children, grandchildren, ...), as they are now.
std::vector<pid_t> process_tree(pid_t root);

// The whole file, NULs included (cmdline and environ separate entries with NUL);
// "" when it cannot be read (the process is gone).
std::string read_proc_file(pid_t pid, const std::string& name);

struct ListeningSocket {
  pid_t pid = -1;
  std::string address;  // "127.0.0.1", "0.0.0.0", "::1", "::", ...
  uint16_t port = 0;
  bool loopback = false;
};

// The TCP sockets in LISTEN state that `pids` hold now (from /proc/net/tcp and
// /proc/net/tcp6 and each process's fds).
std::vector<ListeningSocket> listening_sockets(const std::vector<pid_t>& pids);

}  // namespace thd::test
