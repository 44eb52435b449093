#include "datachannel/nccl/nccl_rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <thd/error.h>

#include "datachannel/check.h"
#include "datachannel/net/auth.h"
#include "tensor/cuda/cuda_check.h"

namespace thd::detail::nccl {

namespace {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

// Hosts (and containers) that share a name are told apart by the boot id, as
// NCCL tells them apart.
std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

std::string member_key(const std::string& prefix, int member) { return fmt::format("{}/member/{}", prefix, member); }
std::string id_key(const std::string& prefix) { return prefix + "/id"; }

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (;;) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return lines;
    start = end + 1;
  }
}

bool parse_int(const std::string& text, int& out) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

std::chrono::milliseconds left_until(net::Deadline deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - net::Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

void wait_for_members(Store& store, const std::string& prefix, const std::vector<int>& world_ranks,
                      net::Deadline deadline, const CallSite& where) {
  std::vector<std::string> keys;
  for (size_t i = 0; i < world_ranks.size(); ++i) keys.push_back(member_key(prefix, static_cast<int>(i)));
  keys.push_back(id_key(prefix));
  try {
    store.wait(keys, left_until(deadline));
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    std::vector<int> missing_world;
    for (size_t i = 0; i < world_ranks.size(); ++i) {
      if (!store.check({keys[i]})) {
        missing.push_back(static_cast<int>(i));
        missing_world.push_back(world_ranks[i]);
      }
    }
    const char* s = missing.size() == 1 ? "" : "s";
    THD_THROW_AT(TimeoutError, where.op, where.rank, missing_world.empty() ? -1 : missing_world.front(),
                 "the NCCL communicator of world ranks {} could not be set up: member{} {} (world rank{} {}) did "
                 "not arrive before the deadline; every member of a group must take part in its first device "
                 "operation",
                 fmt::join(world_ranks, ", "), s, fmt::join(missing, ", "), s, fmt::join(missing_world, ", "));
  }
}

// ValueError when two members would run on one GPU.
void check_one_gpu_each(const std::vector<Placement>& members, const std::vector<int>& world_ranks,
                        const CallSite& where) {
  std::map<std::pair<std::string, std::string>, std::vector<int>> users;  // (host, gpu) -> members
  std::map<std::string, int> per_host;
  for (size_t i = 0; i < members.size(); ++i) {
    users[{members[i].host_id, members[i].gpu}].push_back(static_cast<int>(i));
    ++per_host[members[i].host_id];
  }
  for (const auto& [key, who] : users) {
    if (who.size() < 2) continue;
    const Placement& p = members[static_cast<size_t>(who[0])];
    const int on_host = per_host[key.first];
    std::vector<int> world;
    for (int m : who) world.push_back(world_ranks[static_cast<size_t>(m)]);
    THD_THROW_AT(ValueError, where.op, where.rank, world[1],
                 "members {} of the group (world ranks {}) would all use GPU {} (cuda:{}) on host '{}': NCCL "
                 "cannot run two ranks of a communicator on one GPU. The group has {} rank{} on '{}', which has "
                 "{} GPU{}{}; give every rank a GPU of its own (device = local rank % device count)",
                 fmt::join(who, ", "), fmt::join(world, ", "), p.gpu, p.device, p.host_name, on_host,
                 on_host == 1 ? "" : "s", p.host_name,
                 p.device_count, p.device_count == 1 ? "" : "s",
                 on_host > p.device_count ? fmt::format(", so it needs {} more", on_host - p.device_count) : "");
  }
}

}  // namespace

Placement placement_of(int device, const CallSite& where) {
  Placement p;
  const std::string name = host_name();
  p.host_name = name;
  if (auto forced = net::process_env("NCCL_HOSTID"); forced && !forced->empty()) {
    p.host_id = *forced;
  } else {
    p.host_id = name + "/" + boot_id();
  }
  char bus[64] = {};
  THD_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), device), where.op.c_str());
  p.gpu = bus;
  p.device = device;
  THD_CUDA_CHECK(cudaGetDeviceCount(&p.device_count), where.op.c_str());
  return p;
}

std::string encode(const Placement& p) {
  return fmt::format("{}\n{}\n{}\n{}\n{}", p.host_id, p.host_name, p.gpu, p.device, p.device_count);
}

Placement decode(const std::string& text, const CallSite& where) {
  const auto lines = split_lines(text);
  Placement p;
  if (lines.size() == 5 && parse_int(lines[3], p.device) && parse_int(lines[4], p.device_count)) {
    p.host_id = lines[0];
    p.host_name = lines[1];
    p.gpu = lines[2];
    return p;
  }
  THD_THROW_AT(ValueError, where.op, where.rank, -1, "the store holds a malformed NCCL member entry '{}'", text);
}

ncclUniqueId meet(Store& store, const std::string& prefix, const std::vector<int>& world_ranks, int me,
                  const Placement& mine, net::Deadline deadline, const CallSite& where) {
  ncclUniqueId id{};
  if (me == 0) {
    THD_NCCL_CALL(ncclGetUniqueId(&id), where);
    store.set(id_key(prefix),
              std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(&id), reinterpret_cast<const uint8_t*>(&id + 1)));
  }
  store.set(member_key(prefix, me), encode(mine));
  wait_for_members(store, prefix, world_ranks, deadline, where);

  std::vector<Placement> members;
  for (size_t i = 0; i < world_ranks.size(); ++i) {
    const auto bytes = store.get(member_key(prefix, static_cast<int>(i)), left_until(deadline));
    members.push_back(decode(std::string(bytes.begin(), bytes.end()), where));
  }
  check_one_gpu_each(members, world_ranks, where);

  if (me != 0) {
    const auto bytes = store.get(id_key(prefix), left_until(deadline));
    if (bytes.size() != sizeof(id)) {
      THD_THROW_AT(ValueError, where.op, where.rank, world_ranks[0],
                   "the store holds an NCCL unique id of {} bytes under '{}'; it must have {}", bytes.size(),
                   id_key(prefix), sizeof(id));
    }
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  return id;
}

}  // namespace thd::detail::nccl
