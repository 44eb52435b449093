#include "tools/thdrun/options.h"

#include <charconv>
#include <cmath>
#include <set>
#include <string_view>

#include <thd/config.h>

#include "tensor/check.h"

namespace thd::launch {
namespace {

constexpr const char* kOp = "thdrun";
constexpr double kMaxKillGraceSeconds = 3600;

enum class Opt { Nproc, MasterAddr, MasterPort, TimeoutKill, TagOutput, Pool, Listen, Help, Version };

struct OptionSpec {
  Opt id;
  std::string_view name;  // as written on the command line
  bool takes_value;
};

// Every spelling thdrun accepts; aliases share an id (and count as one option when
// checking that nothing is given twice).
constexpr OptionSpec kOptions[] = {
    {Opt::Nproc, "-n", true},
    {Opt::Nproc, "--nproc", true},
    {Opt::Nproc, "--nproc-per-node", true},
    {Opt::MasterAddr, "--master-addr", true},
    {Opt::MasterPort, "--master-port", true},
    {Opt::TimeoutKill, "--timeout-kill", true},
    {Opt::TagOutput, "--tag-output", false},
    {Opt::Pool, "--pool", false},
    {Opt::Listen, "--listen", true},
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

// The whole of `text` as an integer, or nullopt.
std::optional<long long> parse_integer(std::string_view text) {
  long long v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

int parse_nproc(std::string_view name, std::string_view value) {
  auto v = parse_integer(value);
  THD_CHECK(v && *v >= 1 && *v <= kMaxLocalProcesses, ValueError, kOp,
            "{} expects a number of processes from 1 to {}, got '{}'", name, kMaxLocalProcesses, value);
  return static_cast<int>(*v);
}

uint16_t parse_port(std::string_view name, std::string_view value) {
  auto v = parse_integer(value);
  THD_CHECK(v && *v >= 1 && *v <= 65535, ValueError, kOp, "{} expects a TCP port from 1 to 65535, got '{}'",
            name, value);
  return static_cast<uint16_t>(*v);
}

// "HOST:PORT" or "[v6]:PORT"; port 0 asks for a free one.
void parse_listen(std::string_view name, std::string_view value, LaunchOptions& o) {
  std::string_view host, port;
  if (value.starts_with('[')) {
    const size_t close = value.find(']');
    const bool ok = close != std::string_view::npos && value.substr(close + 1).starts_with(':');
    THD_CHECK(ok, ValueError, kOp, "{} expects HOST:PORT or [V6]:PORT, got '{}'", name, value);
    host = value.substr(1, close - 1);
    port = value.substr(close + 2);
  } else {
    const size_t colon = value.rfind(':');
    THD_CHECK(colon != std::string_view::npos && value.find(':') == colon, ValueError, kOp,
              "{} expects HOST:PORT (IPv6 in brackets: [::1]:PORT), got '{}'", name, value);
    host = value.substr(0, colon);
    port = value.substr(colon + 1);
  }
  THD_CHECK(!host.empty(), ValueError, kOp, "{} expects HOST:PORT, got '{}' with no host", name, value);
  auto v = parse_integer(port);
  THD_CHECK(v && *v >= 0 && *v <= 65535, ValueError, kOp,
            "{} expects a TCP port from 0 (a free one) to 65535, got '{}'", name, port);
  o.listen_host = std::string(host);
  o.listen_port = static_cast<uint16_t>(*v);
}

std::chrono::milliseconds parse_seconds(std::string_view name, std::string_view value) {
  double s = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), s);
  const bool whole = ec == std::errc() && end == value.data() + value.size() && !value.empty();
  THD_CHECK(whole && std::isfinite(s) && s >= 0 && s <= kMaxKillGraceSeconds, ValueError, kOp,
            "{} expects seconds from 0 to {} (e.g. 5 or 0.5), got '{}'", name, kMaxKillGraceSeconds, value);
  return std::chrono::milliseconds(std::llround(s * 1000));
}

void apply(const OptionSpec& spec, std::string_view value, ParsedArgs& out) {
  LaunchOptions& o = out.options;
  switch (spec.id) {
    case Opt::Nproc:
      o.nproc = parse_nproc(spec.name, value);
      return;
    case Opt::MasterAddr:
      THD_CHECK(!value.empty(), ValueError, kOp, "{} expects a host name or address, got ''", spec.name);
      o.master_addr = std::string(value);
      return;
    case Opt::MasterPort:
      o.master_port = parse_port(spec.name, value);
      return;
    case Opt::TimeoutKill:
      o.kill_grace = parse_seconds(spec.name, value);
      return;
    case Opt::TagOutput:
      o.tag_output = true;
      return;
    case Opt::Pool:
      o.pool = true;
      return;
    case Opt::Listen:
      parse_listen(spec.name, value, o);
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
  size_t i = 0;
  for (; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program ("-" alone too)

    // Split "--name=value" and "-nVALUE"; "-n VALUE" and "--name VALUE" take the next one.
    std::string_view name = arg;
    std::optional<std::string_view> inline_value;
    if (arg.starts_with("--")) {
      if (size_t eq = arg.find('='); eq != std::string_view::npos) {
        name = arg.substr(0, eq);
        inline_value = arg.substr(eq + 1);
      }
    } else if (arg.size() > 2) {
      name = arg.substr(0, 2);
      inline_value = arg.substr(2);
    }
    const OptionSpec* spec = find_option(name);
    THD_CHECK(spec != nullptr, ValueError, kOp, "unknown option '{}'", name);
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
    if (out.action != Action::Run) return out;  // --help and --version need nothing else
  }

  out.options.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (out.options.pool) {
    THD_CHECK(!seen.contains(Opt::MasterAddr) && !seen.contains(Opt::MasterPort), ValueError, kOp,
              "--pool takes --listen HOST:PORT for the pool's address, not --master-addr/--master-port");
    THD_CHECK(out.options.nproc > 0, ValueError, kOp, "missing -n N: how many workers the pool keeps");
  } else {
    THD_CHECK(!seen.contains(Opt::Listen), ValueError, kOp, "--listen is for --pool only");
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

If a process fails (non-zero exit or a signal), the others get SIGTERM, then
SIGKILL, and thdrun exits with the failed process's status (128+signal for a
signal). SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to every process; a
second SIGINT kills them.

options:
  -n, --nproc, --nproc-per-node N
                      processes to start (1 to 1024)
  --master-addr ADDR  address of rank 0's store (default 127.0.0.1)
  --master-port PORT  its port (default: a free port)
  --timeout-kill S    seconds between SIGTERM and SIGKILL when stopping the
                      processes after a failure (default 5)
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

exit status: 0 when every process exits with 0; else the first failure's status;
2 for a bad command line; 126/127 when the program cannot be run / is not found;
1 when thdrun itself fails. A pool stopped by a signal exits 0. Details:
docs/thdrun.md, docs/worker_pool.md
)";
}

std::string version_text() { return std::string("thdrun (thd) ") + THD_VERSION_STRING; }

}  // namespace thd::launch
