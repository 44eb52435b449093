#include "tools/thdrun/pool_host.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <system_error>

#include <thd/store.h>

#include "protocol/pool_store.h"
#include "tensor/check.h"
#include "tools/thdrun/fd.h"
#include "tools/thdrun/pool_supervisor.h"
#include "tools/thdrun/rank_env.h"
#include "tools/thdrun/signals.h"
#include "tools/thdrun/token_dir.h"

namespace thd::launch {
namespace {

constexpr const char* kOp = "thdrun";
// The store's own client (thdrun reads the workers' registrations through it).
constexpr std::chrono::milliseconds kStoreTimeout{30000};

bool is_wildcard(const std::string& host) { return host == "0.0.0.0" || host == "::" || host == "*"; }

std::string this_host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

std::vector<std::string> with_variable(std::vector<std::string> env, const std::string& name,
                                       const std::string& value) {
  std::erase_if(env, [&](const std::string& entry) { return entry.starts_with(name + "="); });
  env.push_back(name + "=" + value);
  return env;
}

// The secret thdrun just wrote (token_dir.h): the store's server needs it, and
// thdrun's own environment does not name the file.
std::string read_token(const std::string& file) {
  std::ifstream in(file);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  THD_CHECK(!token.empty(), Error, kOp, "cannot read the auth token back from '{}'", file);
  return token;
}

std::string token_note(const std::optional<TokenDir>& token, const std::vector<std::string>& env) {
  if (token) return fmt::format("THD_AUTH_TOKEN_FILE={}", token->file());
  if (auto file = find_variable(env, "THD_AUTH_TOKEN_FILE"); file && !find_variable(env, "THD_AUTH_TOKEN")) {
    return fmt::format("THD_AUTH_TOKEN_FILE={} (inherited)", *file);
  }
  return "THD_AUTH_TOKEN from thdrun's environment (masters need the same)";
}

}  // namespace

std::string worker_program() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path sibling = self.parent_path() / "thd-worker";
    if (::access(sibling.c_str(), X_OK) == 0) return sibling.string();
  }
  return "thd-worker";
}

int run_pool(const LaunchOptions& options) {
  // Torn down in reverse: the processes (supervisor) first, then the store, then
  // the token directory, and the signal handlers last.
  SignalEvents signals;

  const std::vector<std::string> base_env = current_environment();
  std::optional<TokenDir> token;
  if (!has_auth_token(base_env)) token.emplace(TokenDir::create());
  std::vector<std::string> env = base_env;
  if (token) env = with_variable(env, "THD_AUTH_TOKEN_FILE", token->file());

  TCPStoreOptions so;
  so.host = options.listen_host;
  so.port = options.listen_port;
  so.is_server = true;
  so.wait_for_workers = false;
  so.timeout = kStoreTimeout;
  if (token) so.token = read_token(token->file());
  TCPStore store(std::move(so));
  store.set(pool::kSizeKey, std::to_string(options.nproc));

  const bool wildcard = is_wildcard(options.listen_host);
  const std::string url = pool::pool_url(wildcard ? this_host_name() : options.listen_host, store.port());
  const std::string local_url =
      pool::pool_url(wildcard ? (options.listen_host == "::" ? "::1" : "127.0.0.1") : options.listen_host, store.port());
  const std::string bind_host = wildcard ? "0.0.0.0" : options.listen_host;
  const std::string worker = worker_program();

  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  THD_CHECK(dev_null.valid(), Error, kOp, "cannot open /dev/null: {}", std::system_category().message(errno));

  PoolSupervisorOptions po;
  po.nodes = options.nproc;
  po.kill_grace = options.kill_grace;
  po.tag_output = options.tag_output;
  po.worker = [&](int node) {
    ProcessSpec spec;
    spec.argv = {worker,      "--pool",    local_url, "--node", std::to_string(node), "--nodes",
                 std::to_string(options.nproc), "--bind-host", bind_host};
    spec.env = env;
    spec.stdin_fd = dev_null.get();
    return spec;
  };
  std::vector<std::string> registered;
  for (int node = 0; node < options.nproc; ++node) registered.push_back(pool::worker_key(node));
  po.ready = [&] { return store.check(registered); };

  const bool serving = options.command.empty();
  if (serving) {
    // What a master needs, on stdout for whoever started the pool (scripts parse
    // the first line's address).
    fmt::print("thdrun: worker pool: {} ({} nodes)\n", url, options.nproc);
    fmt::print("thdrun: token: {}\n", token_note(token, base_env));
    std::fflush(stdout);
    po.on_ready = [] {
      fmt::print("thdrun: pool ready\n");
      std::fflush(stdout);
    };
  } else {
    ProcessSpec program;
    program.argv = options.command;
    program.env = with_variable(env, "THD_POOL_URL", url);
    program.stdin_fd = ::isatty(STDIN_FILENO) == 0 ? -1 : dev_null.get();
    po.program = std::move(program);
  }

  PoolSupervisor supervisor(signals, std::move(po));
  return supervisor.run();
}

}  // namespace thd::launch
