#include "tools/thd_worker/options.h"

#include <string_view>

#include <thd/config.h>

#include "protocol/pool_store.h"
#include "tensor/check.h"
#include "tools/common/cli.h"

namespace thd::worker_cli {
namespace {

constexpr const char* kOp = "thd-worker";
constexpr double kMaxConnectTimeoutSeconds = 24 * 3600;

enum class Opt { Pool, Node, Nodes, BindHost, HostStore, ConnectTimeout };

constexpr cli::OptionSpec<Opt> kOptions[] = {
    {Opt::Pool, "--pool", true},
    {Opt::Node, "--node", true},
    {Opt::Nodes, "--nodes", true},
    {Opt::BindHost, "--bind-host", true},
    {Opt::HostStore, "--host-store", false},
    {Opt::ConnectTimeout, "--connect-timeout", true},
};

int parse_count(std::string_view name, std::string_view value, int min, int max) {
  return static_cast<int>(cli::parse_number(kOp, name, value, min, max));
}

void apply(const cli::OptionSpec<Opt>& spec, std::string_view value, worker::PoolOptions& p) {
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
      p.bind_host = cli::parse_host(kOp, spec.name, value);
      return;
    case Opt::HostStore:
      p.host_store = true;
      return;
    case Opt::ConnectTimeout:
      p.connect_timeout = cli::parse_seconds(kOp, spec.name, value, kMaxConnectTimeoutSeconds);
      return;
  }
}

}  // namespace

ParsedArgs parse_args(std::span<const std::string> args) {
  ParsedArgs out;
  cli::OptionReader<Opt> reader(kOp, kOptions, args, {.operands = cli::Operands::Reject});
  while (auto option = reader.next()) apply(option->spec, option->value, out.pool);
  if (const auto builtin = reader.builtin()) {
    out.action = *builtin == cli::Builtin::Help ? Action::Help : Action::Version;
    return out;  // --help and --version need nothing else on the line
  }
  THD_CHECK(reader.seen(Opt::Pool), ValueError, kOp, "missing --pool tcp://HOST:PORT: the pool's store");
  THD_CHECK(reader.seen(Opt::Node), ValueError, kOp, "missing --node K: which node this worker is");
  THD_CHECK(reader.seen(Opt::Nodes), ValueError, kOp, "missing --nodes N: how many nodes the pool has");
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
