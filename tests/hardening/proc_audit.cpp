#include "proc_audit.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace thd::test {

namespace {

struct Endpoint {
  std::string address;
  uint16_t port = 0;
  bool loopback = false;
};

uint32_t hex32(const std::string& text) { return static_cast<uint32_t>(std::stoul(text, nullptr, 16)); }

// "0100007F:1F90" (IPv4, the address in host byte order of a little-endian
// kernel) or 32 hex digits of IPv6 in four such words.
Endpoint parse_endpoint(const std::string& field) {
  Endpoint e;
  const size_t colon = field.find(':');
  const std::string addr = field.substr(0, colon);
  e.port = static_cast<uint16_t>(std::stoul(field.substr(colon + 1), nullptr, 16));
  auto dotted = [](uint32_t word) {
    return std::to_string(word & 0xff) + "." + std::to_string((word >> 8) & 0xff) + "." +
           std::to_string((word >> 16) & 0xff) + "." + std::to_string(word >> 24);
  };
  if (addr.size() == 8) {
    const uint32_t word = hex32(addr);
    e.address = dotted(word);
    e.loopback = (word & 0xff) == 127;
    return e;
  }
  uint32_t words[4];
  for (int i = 0; i < 4; ++i) words[i] = hex32(addr.substr(static_cast<size_t>(8 * i), 8));
  if (words[0] == 0 && words[1] == 0 && words[2] == 0 && words[3] == 0x01000000) {
    e.address = "::1";
    e.loopback = true;
  } else if (words[0] == 0 && words[1] == 0 && words[2] == 0xffff0000) {
    e.address = "::ffff:" + dotted(words[3]);
    e.loopback = (words[3] & 0xff) == 127;
  } else {
    e.address = "[" + addr + "]";  // anything else, "::" included, is not loopback
  }
  return e;
}

// inode -> endpoint of every listening TCP socket on the host.
std::map<std::string, Endpoint> listening_by_inode() {
  std::map<std::string, Endpoint> out;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string sl, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (state == "0A") out[inode] = parse_endpoint(local);
    }
  }
  return out;
}

}  // namespace

std::vector<pid_t> process_tree(pid_t root) {
  std::vector<pid_t> out = {root};
  for (size_t i = 0; i < out.size(); ++i) {
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(out[i]) + "/task", ec)) {
      std::ifstream in(task.path() / "children");
      for (pid_t child; in >> child;) out.push_back(child);
    }
  }
  return out;
}

std::string read_proc_file(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + name, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<ListeningSocket> listening_sockets(const std::vector<pid_t>& pids) {
  const std::map<std::string, Endpoint> listening = listening_by_inode();
  std::vector<ListeningSocket> out;
  for (pid_t pid : pids) {
    std::error_code ec;
    for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
      std::error_code link_ec;
      const std::string target = std::filesystem::read_symlink(fd.path(), link_ec).string();
      if (link_ec || !target.starts_with("socket:[")) continue;
      const std::string inode = target.substr(8, target.size() - 9);
      auto it = listening.find(inode);
      if (it == listening.end()) continue;
      out.push_back({pid, it->second.address, it->second.port, it->second.loopback});
    }
  }
  return out;
}

}  // namespace thd::test
