// The --hardening-listener role (roles.h): a listener that runs the auth handshake,
// in a process of its own with few descriptors, for the flood tests.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <thd/datachannel.h>
#include <thd/store.h>

#include "datachannel/tcp/mesh.h"
#include "raw_peer.h"
#include "roles.h"

namespace thd::test {
namespace {

using namespace std::chrono_literals;

void say(const std::string& line) {
  const std::string text = line + "\n";
  [[maybe_unused]] const ssize_t n = ::write(1, text.data(), text.size());
}

bool lower_descriptor_limit() {
  const char* want = std::getenv("THD_HARDENING_NOFILE");
  if (want == nullptr) return true;
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
  limit.rlim_cur = std::min<rlim_t>(static_cast<rlim_t>(std::atoll(want)), limit.rlim_max);
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

int store() {
  TCPStore server({.host = "127.0.0.1", .port = 0, .is_server = true, .wait_for_workers = false,
                   .timeout = std::chrono::milliseconds(10000)});
  say("listening port=" + std::to_string(server.port()));
  std::this_thread::sleep_for(1min);
  return 0;
}

int mesh() {
  constexpr auto kTimeout = std::chrono::milliseconds(20000);
  const std::string release = std::getenv("THD_HARDENING_RELEASE") != nullptr ? std::getenv("THD_HARDENING_RELEASE") : "";
  auto kv = std::make_shared<HashStore>(kTimeout);
  std::shared_ptr<DataChannel> channels[3];
  std::exception_ptr errors[3];
  auto make = [&](int rank) {
    try {
      channels[rank] = DataChannel::create("tcp", {.store = kv, .rank = rank, .world_size = 3, .timeout = kTimeout});
    } catch (...) {
      errors[rank] = std::current_exception();
    }
  };
  std::thread ranks[3];
  ranks[0] = std::thread(make, 0);
  const std::vector<uint8_t> endpoint = kv->get(tcp_channel_key(1, "addr/0"));
  std::string host;
  uint16_t port = 0;
  if (!detail::tcp::parse_endpoint(std::string(endpoint.begin(), endpoint.end()), &host, &port)) {
    say("mesh failed: rank 0 published no endpoint");
    ranks[0].join();
    return 1;
  }
  say("listening port=" + std::to_string(port));
  const auto wait_until = std::chrono::steady_clock::now() + 30s;
  while (!release.empty() && !std::filesystem::exists(release) && std::chrono::steady_clock::now() < wait_until) {
    std::this_thread::sleep_for(2ms);
  }
  const auto start = std::chrono::steady_clock::now();
  ranks[1] = std::thread(make, 1);
  ranks[2] = std::thread(make, 2);
  for (auto& t : ranks) t.join();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  for (int r = 0; r < 3; ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const std::exception& e) {
      say("mesh failed: rank " + std::to_string(r) + ": " + e.what());
    }
    return 1;
  }
  say("mesh complete in " + std::to_string(took.count()) + " ms");
  return 0;
}

}  // namespace

int run_listener_role(const char* kind) {
  if (!lower_descriptor_limit()) {
    std::fprintf(stderr, "cannot lower RLIMIT_NOFILE: %s\n", std::strerror(errno));
    return 2;
  }
  try {
    if (std::strcmp(kind, "store") == 0) return store();
    if (std::strcmp(kind, "mesh") == 0) return mesh();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "listener: %s\n", e.what());
    return 3;
  }
  std::fprintf(stderr, "%s takes store or mesh, got '%s'\n", kListenerRole, kind);
  return 2;
}

}  // namespace thd::test
