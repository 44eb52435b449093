#include "tools/thdrun/options.h"

#include <algorithm>
#include <string_view>

#include <fmt/ranges.h>

#include <thd/config.h>
#include <thd/datachannel.h>

#include "tensor/check.h"
#include "tools/common/cli.h"

namespace thd::launch {
namespace {

constexpr const char* kOp = "thdrun";
constexpr double kMaxKillGraceSeconds = 3600;

enum class Opt { Nproc, MasterAddr, MasterPort, TimeoutKill, TagOutput, Pool, Listen, Backend, OnRankFailure };

// Every spelling thdrun accepts.
constexpr cli::OptionSpec<Opt> kOptions[] = {
    {Opt::Nproc, "-n", true},
    {Opt::Nproc, "--nproc", true},
    {Opt::Nproc, "--nproc-per-node", true},
    {Opt::MasterAddr, "--master-addr", true},
    {Opt::MasterPort, "--master-port", true},
    {Opt::TimeoutKill, "--timeout-kill", true},
    {Opt::TagOutput, "--tag-output", false},
    {Opt::Pool, "--pool", false},
    {Opt::Listen, "--listen", true},
    {Opt::Backend, "--backend", true},
    {Opt::OnRankFailure, "--on-rank-failure", true},
};

OnRankFailure parse_on_rank_failure(std::string_view name, std::string_view value) {
  if (value == "auto") return OnRankFailure::Auto;
  if (value == "kill-all") return OnRankFailure::KillAll;
  if (value == "master-decides") return OnRankFailure::MasterDecides;
  THD_THROW(ValueError, kOp, "{} takes auto, kill-all or master-decides, got '{}'", name, value);
}

void apply(const cli::OptionSpec<Opt>& spec, std::string_view value, LaunchOptions& o) {
  switch (spec.id) {
    case Opt::Nproc:
      o.nproc = static_cast<int>(
          cli::parse_number(kOp, spec.name, value, 1, kMaxLocalProcesses, "a number of processes"));
      return;
    case Opt::MasterAddr:
      o.master_addr = cli::parse_host(kOp, spec.name, value);
      return;
    case Opt::MasterPort:
      o.master_port = cli::parse_port(kOp, spec.name, value);
      return;
    case Opt::TimeoutKill:
      o.kill_grace = cli::parse_seconds(kOp, spec.name, value, kMaxKillGraceSeconds, " (e.g. 5 or 0.5)");
      return;
    case Opt::TagOutput:
      o.tag_output = true;
      return;
    case Opt::Pool:
      o.pool = true;
      return;
    case Opt::Backend: {
      // The registry's list: the backends built into thd and the modules found
      // (THD_BACKEND_PATH included), so a job never starts with a name its
      // ranks would reject.
      const auto available = DataChannel::available_backends();
      THD_CHECK(std::find(available.begin(), available.end(), value) != available.end(), ValueError, kOp,
                "{} takes a backend of this thd ({}), got '{}'", spec.name, fmt::join(available, ", "), value);
      o.backend = std::string(value);
      return;
    }
    case Opt::OnRankFailure:
      o.on_rank_failure = parse_on_rank_failure(spec.name, value);
      return;
    case Opt::Listen: {
      cli::HostPort listen = cli::parse_listen_address(kOp, spec.name, value);
      o.listen_host = std::move(listen.host);
      o.listen_port = listen.port;
      return;
    }
  }
}

}  // namespace

ParsedArgs parse_args(std::span<const std::string> args) {
  ParsedArgs out;
  // Options end at the program (or after "--"); "-nVALUE" is "-n VALUE".
  cli::OptionReader<Opt> reader(kOp, kOptions, args, {.operands = cli::Operands::End, .short_values = true});
  while (auto option = reader.next()) apply(option->spec, option->value, out.options);
  if (const auto builtin = reader.builtin()) {
    out.action = *builtin == cli::Builtin::Help ? Action::Help : Action::Version;
    return out;  // --help and --version need nothing else on the line
  }

  const std::span<const std::string> command = reader.operands();
  out.options.command.assign(command.begin(), command.end());
  if (out.options.pool) {
    THD_CHECK(!reader.seen(Opt::MasterAddr) && !reader.seen(Opt::MasterPort), ValueError, kOp,
              "--pool takes --listen HOST:PORT for the pool's address, not --master-addr/--master-port");
    THD_CHECK(out.options.nproc > 0, ValueError, kOp, "missing -n N: how many workers the pool keeps");
    THD_CHECK(!reader.seen(Opt::OnRankFailure), ValueError, kOp,
              "--on-rank-failure is for a job's ranks; a pool's master and workers have a policy of their own "
              "(docs/worker_pool.md)");
  } else {
    THD_CHECK(!reader.seen(Opt::Listen), ValueError, kOp, "--listen is for --pool only");
    THD_CHECK(!out.options.command.empty(), ValueError, kOp, "no program to run");
    THD_CHECK(out.options.nproc > 0, ValueError, kOp, "missing -n N: how many processes to start");
  }
  THD_CHECK(out.options.command.empty() || !out.options.command.front().empty(), ValueError, kOp,
            "the program name is empty");
  return out;
}

std::string usage_line() {
  return "usage: thdrun -n N [options] [--] program [args...]\n"
         "       thdrun --pool -n N [--listen HOST:PORT] [options] [[--] program [args...]]";
}

std::string help_text() {
  return usage_line() + R"(

Starts N local processes of `program` (found through PATH, as a shell would) and
supervises them. Each process gets the environment of a thd job:

  RANK, LOCAL_RANK          0 .. N-1
  WORLD_SIZE, LOCAL_WORLD_SIZE
                            N
  MASTER_ADDR, MASTER_PORT  where rank 0 hosts the rendezvous store
  THD_AUTH_TOKEN_FILE       a fresh secret in a private file, removed when thdrun
                            exits (kept as is when THD_AUTH_TOKEN or
                            THD_AUTH_TOKEN_FILE is already set)

If a process fails (non-zero exit or a signal), what happens depends on
--on-rank-failure. kill-all: the others get SIGTERM, then SIGKILL, and thdrun
exits with the failed process's status (128+signal for a signal).
master-decides: a failed worker (rank > 0) is reported and the job goes on (the
master sees thd::WorkerLost); the job ends when the master (rank 0) exits: the
ranks still running get SIGTERM at once if it failed, after the --timeout-kill
grace period if it exited 0, and thdrun exits with the master's status. The
default, auto, is master-decides for a master-worker job (init_master_worker
tells thdrun so once its workers are connected) and kill-all otherwise.
SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to every process; a second
SIGINT kills them.

options:
  -n, --nproc, --nproc-per-node N
                      processes to start (1 to 1024)
  --master-addr ADDR  address of rank 0's store (default 127.0.0.1)
  --master-port PORT  its port (default: a free port)
  --timeout-kill S    seconds between SIGTERM and SIGKILL when stopping the
                      processes after a failure, and the time workers have to
                      exit by themselves after the master (default 5)
  --on-rank-failure auto|kill-all|master-decides
                      what a failed rank does to the job (default auto: see
                      above)
  --backend NAME      the DataChannel backend of the job (one of "backends"
                      below): exported as THD_BACKEND, which
                      init_master_worker and init_process_group use when the
                      program names none
  --tag-output        prefix every output line with "[rank R] " ("[node K] " and
                      "[master] " with --pool)
  --pool              keep a pool of N thd-worker processes (nodes 0..N-1)
                      serving one master after another, until SIGINT/SIGTERM;
                      with a program, run it as the pool's master and stop the
                      pool when it exits (it finds the pool in THD_POOL_URL)
  --listen HOST:PORT  where the pool's store listens (default 127.0.0.1 and a
                      free port); masters attach with init_method tcp://HOST:PORT
  -h, --help          this text
  -V, --version       thdrun's version

exit status: 0 when every process exits with 0; else the first failure's status
(master-decides: the master's status, whatever the workers' were);
2 for a bad command line; 126/127 when the program cannot be run / is not found;
1 when thdrun itself fails. A pool stopped by a signal exits 0. Details:
docs/thdrun.md, docs/worker_pool.md
)" + fmt::format("\nbackends: {}\n", fmt::join(DataChannel::available_backends(), ", "));
}

std::string version_text() { return std::string("thdrun (thd) ") + THD_VERSION_STRING; }

}  // namespace thd::launch
