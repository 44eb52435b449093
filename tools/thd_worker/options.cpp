#include "tools/thd_worker/options.h"

#include <charconv>
#include <cmath>
#include <optional>
#include <set>
#include <string_view>

#include <thd/config.h>

#include "protocol/pool_store.h"
#include "tensor/check.h"

namespace thd::worker_cli {
namespace {

constexpr const char* kOp = "thd-worker";
constexpr double kMaxConnectTimeoutSeconds = 24 * 3600;

enum class Opt { Pool, Node, Nodes, BindHost, HostStore, ConnectTimeout, Help, Version };

struct OptionSpec {
  Opt id;
  std::string_view name;
  bool takes_value;
};

constexpr OptionSpec kOptions[] = {
    {Opt::Pool, "--pool", true},
    {Opt::Node, "--node", true},
    {Opt::Nodes, "--nodes", true},
    {Opt::BindHost, "--bind-host", true},
    {Opt::HostStore, "--host-store", false},
    {Opt::ConnectTimeout, "--connect-timeout", true},
    {Opt::Help, "-h", false},
    {Opt::Help, "--help", false},
    {Opt::Version, "-V", false},
    {Opt::Version, "--version", false},
};

const OptionSpec* find_option(std::string_view name) {
  for (const OptionSpec& o : kOptions) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

int parse_count(std::string_view name, std::string_view value, int min, int max) {
  auto v = pool::parse_decimal(value, min, max);
  THD_CHECK(v.has_value(), ValueError, kOp, "{} expects a number from {} to {}, got '{}'", name, min, max, value);
  return static_cast<int>(*v);
}

std::chrono::milliseconds parse_seconds(std::string_view name, std::string_view value) {
  double s = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), s);
  const bool whole = ec == std::errc() && end == value.data() + value.size() && !value.empty();
  THD_CHECK(whole && std::isfinite(s) && s >= 0 && s <= kMaxConnectTimeoutSeconds, ValueError, kOp,
            "{} expects seconds from 0 to {}, got '{}'", name, kMaxConnectTimeoutSeconds, value);
  return std::chrono::milliseconds(std::llround(s * 1000));
}

void apply(const OptionSpec& spec, std::string_view value, ParsedArgs& out) {
  worker::PoolOptions& p = out.pool;
  switch (spec.id) {
    case Opt::Pool:
      pool::parse_pool_url(value, kOp);  // checked here, so a typo is a usage error
      p.pool_url = std::string(value);
      return;
    case Opt::Node:
      p.node = parse_count(spec.name, value, 0, pool::kMaxNodes - 1);
      return;
    case Opt::Nodes:
      p.num_nodes = parse_count(spec.name, value, 1, pool::kMaxNodes);
      return;
    case Opt::BindHost:
      THD_CHECK(!value.empty(), ValueError, kOp, "{} expects a host name or address, got ''", spec.name);
      p.bind_host = std::string(value);
      return;
    case Opt::HostStore:
      p.host_store = true;
      return;
    case Opt::ConnectTimeout:
      p.connect_timeout = parse_seconds(spec.name, value);
      return;
    case Opt::Help:
      out.action = Action::Help;
      return;
    case Opt::Version:
      out.action = Action::Version;
      return;
  }
}

}  // namespace

ParsedArgs parse_args(std::span<const std::string> args) {
  ParsedArgs out;
  std::set<Opt> seen;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    std::string_view name = arg;
    std::optional<std::string_view> inline_value;
    if (arg.starts_with("--")) {
      if (size_t eq = arg.find('='); eq != std::string_view::npos) {
        name = arg.substr(0, eq);
        inline_value = arg.substr(eq + 1);
      }
    }
    const OptionSpec* spec = find_option(name);
    THD_CHECK(spec != nullptr, ValueError, kOp, "{} '{}'",
              arg.starts_with("-") ? "unknown option" : "unexpected argument", name);
    THD_CHECK(seen.insert(spec->id).second, ValueError, kOp, "option {} is given twice", name);
    std::string_view value;
    if (spec->takes_value) {
      if (inline_value) {
        value = *inline_value;
      } else {
        THD_CHECK(i + 1 < args.size(), ValueError, kOp, "option {} needs a value", name);
        value = args[++i];
      }
    } else {
      THD_CHECK(!inline_value, ValueError, kOp, "option {} takes no value, got '{}'", name, arg);
    }
    apply(*spec, value, out);
    if (out.action != Action::Serve) return out;
  }
  THD_CHECK(seen.contains(Opt::Pool), ValueError, kOp, "missing --pool tcp://HOST:PORT: the pool's store");
  THD_CHECK(seen.contains(Opt::Node), ValueError, kOp, "missing --node K: which node this worker is");
  THD_CHECK(seen.contains(Opt::Nodes), ValueError, kOp, "missing --nodes N: how many nodes the pool has");
  THD_CHECK(out.pool.node < out.pool.num_nodes, ValueError, kOp, "--node {} is not in 0..{} (--nodes {})",
            out.pool.node, out.pool.num_nodes - 1, out.pool.num_nodes);
  return out;
}

std::string usage_line() { return "usage: thd-worker --pool tcp://HOST:PORT --node K --nodes N [options]"; }

std::string help_text() {
  return usage_line() + R"(

Serves as node K of a worker pool of N nodes: waits for a master to attach
(thd::init_master_worker with init_method tcp://HOST:PORT), serves its session,
frees every tensor of it when the master detaches or dies, and waits for the
next one. `thdrun --pool -n N` starts and supervises N of these for you.

The token comes from THD_AUTH_TOKEN or THD_AUTH_TOKEN_FILE, never from the
command line.

options:
  --pool tcp://HOST:PORT  the pool's store (IPv6: tcp://[::1]:PORT)
  --node K                this worker's node, 0 .. N-1
  --nodes N               the pool's size (1 to 1024); all workers must agree
  --bind-host HOST        where this worker listens for its session's peers
                          (default 127.0.0.1; 0.0.0.0 for every interface)
  --host-store            host the pool's store in this process, listening on
                          HOST:PORT, instead of connecting to one
  --connect-timeout S     how long to keep trying to reach the store (default 60)
  -h, --help              this text
  -V, --version           thd-worker's version

SIGINT, SIGTERM and SIGHUP stop it: at once between sessions; during a
session the worker ends and its master sees thd::WorkerLost for this node.
exit status: 0 when stopped by a signal between sessions, 1 on an error (the
store refused the token or went away), 2 for a bad command line.
Details: docs/worker_pool.md
)";
}

std::string version_text() { return std::string("thd-worker (thd) ") + THD_VERSION_STRING; }

}  // namespace thd::worker_cli
