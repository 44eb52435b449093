#include "rank_processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "checks.h"

namespace thd::conformance {

Pipe::Pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  read_fd_ = fds[0];
  write_fd_ = fds[1];
}

Pipe::~Pipe() {
  ::close(read_fd_);
  ::close(write_fd_);
}

void Pipe::write_u16(uint16_t value) {
  uint8_t bytes[2] = {static_cast<uint8_t>(value & 0xff), static_cast<uint8_t>(value >> 8)};
  if (::write(write_fd_, bytes, 2) != 2) fail("writing to a test pipe failed");
}

uint16_t Pipe::read_u16(std::chrono::milliseconds timeout) {
  pollfd p{read_fd_, POLLIN, 0};
  const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (ready != 1) fail("nothing arrived on a test pipe within " + std::to_string(timeout.count()) + " ms");
  uint8_t bytes[2];
  if (::read(read_fd_, bytes, 2) != 2) fail("reading a test pipe failed");
  return static_cast<uint16_t>(bytes[0] | (bytes[1] << 8));
}

namespace {

// A rank process's main: any failure is printed with the rank and exits 1.
int run_rank(int rank, const std::function<void()>& body) {
  try {
    body();
    return 0;
  } catch (...) {
    std::fprintf(stderr, "rank %d (pid %d) failed: %s\n", rank, static_cast<int>(::getpid()),
                 describe(std::current_exception()).c_str());
    return 1;
  }
}

}  // namespace

StoreWorld::StoreWorld(int n, RankMain body, std::chrono::milliseconds timeout) {
  for (int r = 0; r < n; ++r) {
    pids_.push_back(children_.spawn([this, r, n, body, timeout] {
      return run_rank(r, [&] {
        TCPStoreOptions o;
        o.host = "127.0.0.1";
        o.is_server = r == 0;
        o.world_size = n;
        o.wait_for_workers = false;
        o.timeout = timeout;
        o.token = std::string(test::kToken);
        if (r != 0) o.port = port_pipe_.read_u16(timeout);
        auto store = std::make_shared<TCPStore>(o);
        if (r == 0) {
          // One copy for every other rank and one for the parent.
          for (int i = 0; i < n; ++i) port_pipe_.write_u16(store->port());
        }
        body(r, store);
      });
    }));
  }
}

uint16_t StoreWorld::store_port(std::chrono::milliseconds timeout) {
  if (!parent_has_port_) {
    port_ = port_pipe_.read_u16(timeout);
    parent_has_port_ = true;
  }
  return port_;
}

std::vector<int> StoreWorld::wait_all(std::chrono::milliseconds timeout) {
  return children_.wait_all(timeout);
}

RendezvousWorld::RendezvousWorld(int n, RankMain body, std::chrono::milliseconds timeout) {
  const uint16_t port = test::free_port();
  for (int r = 0; r < n; ++r) {
    children_.spawn([r, n, port, body, timeout] {
      return run_rank(r, [&] {
        RendezvousOptions o;
        o.init_method = "tcp://127.0.0.1:" + std::to_string(port);
        o.rank = r;
        o.world_size = n;
        o.timeout = timeout;
        o.token = std::string(test::kToken);
        RendezvousResult joined = rendezvous(o);
        require(joined.rank == r && joined.world_size == n,
                "rendezvous returned rank " + std::to_string(joined.rank) + " of " +
                    std::to_string(joined.world_size) + ", expected " + std::to_string(r) + " of " +
                    std::to_string(n));
        body(r, joined.store);
      });
    });
  }
}

std::vector<int> RendezvousWorld::wait_all(std::chrono::milliseconds timeout) { return children_.wait_all(timeout); }

std::shared_ptr<DataChannel> make_channel(const std::string& backend, const std::shared_ptr<Store>& store, int rank,
                                          int world_size, std::chrono::milliseconds timeout) {
  DataChannelOptions o;
  o.store = store;
  o.rank = rank;
  o.world_size = world_size;
  o.timeout = timeout;
  o.token = std::string(test::kToken);
  return DataChannel::create(backend, o);
}

namespace {

std::set<uint64_t> socket_inodes(pid_t pid) {
  std::set<uint64_t> inodes;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return inodes;
  while (dirent* e = ::readdir(d)) {
    char target[128];
    const std::string link = dir + "/" + e->d_name;
    const ssize_t len = ::readlink(link.c_str(), target, sizeof(target) - 1);
    if (len <= 0) continue;
    target[len] = '\0';
    unsigned long long inode = 0;
    if (std::sscanf(target, "socket:[%llu]", &inode) == 1) inodes.insert(inode);
  }
  ::closedir(d);
  return inodes;
}

void add_listeners(const std::string& table, const std::set<uint64_t>& inodes, std::vector<uint16_t>& ports) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    uint64_t inode = 0;
    fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    if (state != "0A" || inodes.count(inode) == 0) continue;  // 0A: TCP_LISTEN
    const auto colon = local.rfind(':');
    if (colon == std::string::npos) continue;
    ports.push_back(static_cast<uint16_t>(std::stoul(local.substr(colon + 1), nullptr, 16)));
  }
}

}  // namespace

std::vector<uint16_t> listening_ports(pid_t pid) {
  const auto inodes = socket_inodes(pid);
  std::vector<uint16_t> ports;
  const std::string net = "/proc/" + std::to_string(pid) + "/net/";
  add_listeners(net + "tcp", inodes, ports);
  add_listeners(net + "tcp6", inodes, ports);
  return ports;
}

std::string describe_exit_codes(const std::vector<int>& codes) {
  std::string out;
  for (size_t r = 0; r < codes.size(); ++r) {
    if (!out.empty()) out += ", ";
    out += "rank " + std::to_string(r) + ": ";
    const int c = codes[r];
    if (c == -1) {
      out += "still running at the deadline (killed)";
    } else if (c > 128) {
      out += "killed by signal " + std::to_string(c - 128) + " (" + ::strsignal(c - 128) + ")";
    } else {
      out += "exit " + std::to_string(c);
    }
  }
  return out;
}

}  // namespace thd::conformance
