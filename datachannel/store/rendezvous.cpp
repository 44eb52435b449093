// rendezvous(): init_method URL -> a connected Store, this process's rank and the
// world size, once every rank has registered.
//
// Registration, in the job's store:
//   rendezvous/world_size  compare_set("", N): the first rank writes it; a rank
//                          that reads back another N was launched inconsistently.
//   rendezvous/rank/<r>    compare_set("", "<host>:<pid>:<nonce>"): claims rank r;
//                          reading back someone else's identity means two
//                          processes were given the same rank.
// Then each rank waits for all N rank keys, and on timeout names the ranks whose
// keys are missing.
#include <thd/store.h>

#include <unistd.h>

#include <charconv>

#include "datachannel/backend_choice.h"
#include "datachannel/backends.h"
#include "datachannel/check.h"
#include "datachannel/net/auth.h"
#include "datachannel/net/socket.h"
#include "datachannel/registry.h"

namespace thd {
namespace {

using std::chrono::milliseconds;

constexpr const char* kOp = "rendezvous";
// How long naming the ranks that did not join may take once the wait for them
// timed out.
constexpr milliseconds kDiagnosisTimeout{1000};
constexpr const char* kExpected = "expected env://, tcp://host:port, file:///absolute/path or mpi://";

struct Target {
  enum class Kind { Tcp, File } kind = Kind::Tcp;
  std::string host;
  uint16_t port = 0;
  std::string path;
};

uint16_t parse_port(std::string_view text, std::string_view what) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  THD_CHECK(ec == std::errc() && end == text.data() + text.size() && !text.empty() && value >= 1 && value <= 65535,
            ValueError, kOp, "{}: port '{}' is not a number in 1..65535", what, text);
  return static_cast<uint16_t>(value);
}

int parse_int(std::string_view text, std::string_view what) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  THD_CHECK(ec == std::errc() && end == text.data() + text.size() && !text.empty(), ValueError, kOp,
            "{}='{}' is not an integer", what, text);
  return value;
}

// "host:port" or "[v6]:port" -> host, port.
void parse_host_port(std::string_view authority, const std::string& url, Target* t) {
  THD_CHECK(authority.find_first_of("/?#") == std::string_view::npos, ValueError, kOp,
            "init_method '{}': tcp:// takes only host:port, with no path or query", url);
  std::string_view host;
  std::string_view rest;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    THD_CHECK(close != std::string_view::npos, ValueError, kOp, "init_method '{}': unterminated '[' in the host", url);
    host = authority.substr(1, close - 1);
    rest = authority.substr(close + 1);
  } else {
    const size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : authority.substr(colon);
    THD_CHECK(rest.find(':', 1) == std::string_view::npos, ValueError, kOp,
              "init_method '{}': write IPv6 addresses in brackets, e.g. tcp://[::1]:29500", url);
  }
  THD_CHECK(!host.empty(), ValueError, kOp, "init_method '{}' has no host; expected tcp://host:port", url);
  THD_CHECK(rest.starts_with(':') && rest.size() > 1, ValueError, kOp,
            "init_method '{}' has no port; expected tcp://host:port", url);
  t->host = std::string(host);
  t->port = parse_port(rest.substr(1), fmt::format("init_method '{}'", url));
}

// Resolves the init_method, and rank and world size for env://, into `opt`.
Target resolve(RendezvousOptions& opt, const net::EnvLookup& env) {
  const std::string& url = opt.init_method;
  const size_t sep = url.find("://");
  THD_CHECK(sep != std::string::npos, ValueError, kOp, "init_method '{}' is not a URL; {}", url, kExpected);
  const std::string scheme = url.substr(0, sep);
  const std::string_view rest = std::string_view(url).substr(sep + 3);
  Target t;
  if (scheme == "tcp") {
    t.kind = Target::Kind::Tcp;
    parse_host_port(rest, url, &t);
  } else if (scheme == "file") {
    t.kind = Target::Kind::File;
    THD_CHECK(rest.starts_with('/'), ValueError, kOp,
              "init_method '{}': file:// needs an absolute path, e.g. file:///tmp/thd_store", url);
    t.path = std::string(rest);
  } else if (scheme == "env") {
    THD_CHECK(rest.empty(), ValueError, kOp,
              "init_method '{}': env:// takes nothing after it (MASTER_ADDR, MASTER_PORT, RANK and "
              "WORLD_SIZE come from the environment)",
              url);
    t.kind = Target::Kind::Tcp;
    auto addr = env("MASTER_ADDR");
    auto port = env("MASTER_PORT");
    auto rank = env("RANK");
    auto world = env("WORLD_SIZE");
    // Under Slurm (srun) the task's rank and the job's size are Slurm's.
    const char* rank_name = "RANK";
    const char* world_name = "WORLD_SIZE";
    if (!rank || rank->empty()) {
      rank = env("SLURM_PROCID");
      rank_name = "SLURM_PROCID";
    }
    if (!world || world->empty()) {
      world = env("SLURM_NTASKS");
      world_name = "SLURM_NTASKS";
    }
    std::vector<std::string> missing;
    if (!addr || addr->empty()) missing.emplace_back("MASTER_ADDR");
    if (!port || port->empty()) missing.emplace_back("MASTER_PORT");
    if (opt.rank < 0 && (!rank || rank->empty())) missing.emplace_back("RANK");
    if (opt.world_size < 0 && (!world || world->empty())) missing.emplace_back("WORLD_SIZE");
    THD_CHECK(missing.empty(), ValueError, kOp,
              "env:// needs {} set in the environment (thdrun sets them; or pass init_method "
              "tcp://host:port with rank and world_size)",
              fmt::join(missing, ", "));
    t.host = *addr;
    t.port = parse_port(*port, "MASTER_PORT");
    auto merge = [](int arg, const std::optional<std::string>& text, const char* name, const char* arg_name) {
      if (!text || text->empty()) return arg;
      const int from_env = parse_int(*text, name);
      THD_CHECK(arg < 0 || arg == from_env, ValueError, kOp,
                "the {} argument {} conflicts with {}={} in the environment", arg_name, arg, name, from_env);
      return from_env;
    };
    opt.rank = merge(opt.rank, rank, rank_name, "rank");
    opt.world_size = merge(opt.world_size, world, world_name, "world_size");
  } else {
    THD_THROW(ValueError, kOp, "unknown init_method scheme '{}://' in '{}'; {}", scheme, url, kExpected);
  }
  THD_CHECK(opt.world_size >= 1, ValueError, kOp, "{} needs world_size >= 1, got {}", url, opt.world_size);
  THD_CHECK(opt.rank >= 0 && opt.rank < opt.world_size, ValueError, kOp,
            "{} needs a rank in [0, {}) (world_size {}), got {}", url, opt.world_size, opt.world_size, opt.rank);
  THD_CHECK(opt.timeout.count() >= 0, ValueError, kOp, "timeout must be >= 0 ms, got {} ms", opt.timeout.count());
  return t;
}

// Adds the rank, and what it was doing with the store, to an error from the store,
// keeping its type.
template <typename E>
[[noreturn]] void rethrow_at_rank(const E& e, int rank, const std::string& doing) {
  ErrorContext ctx = e.context();
  ctx.op = kOp;
  ctx.rank = rank;
  throw E(fmt::format("{}: {}{}", doing, e.context().op.empty() ? "" : e.context().op + ": ", e.message()),
          std::move(ctx));
}

// Where the store is, for messages: "the store at 127.0.0.1:29500".
std::string store_name(const Target& t) {
  return t.kind == Target::Kind::File ? "the file store " + t.path : "the store at " + net::format_endpoint(t.host, t.port);
}

std::shared_ptr<Store> open_store(const Target& t, const RendezvousOptions& opt) {
  if (t.kind == Target::Kind::File) {
    return std::make_shared<FileStore>(t.path, opt.world_size, opt.timeout);
  }
  const std::string where = "cannot reach " + store_name(t);
  TCPStoreOptions o;
  o.host = t.host;
  o.port = t.port;
  o.is_server = opt.rank == 0;
  o.timeout = opt.timeout;
  o.token = opt.token;
  try {
    return std::make_shared<TCPStore>(std::move(o));
  } catch (const TimeoutError& e) {
    rethrow_at_rank(e, opt.rank, where);
  } catch (const AuthError& e) {
    rethrow_at_rank(e, opt.rank, where);
  } catch (const PeerLost& e) {
    rethrow_at_rank(e, opt.rank, where);
  } catch (const ConnectionError& e) {
    rethrow_at_rank(e, opt.rank, where);
  }
}

std::string identity() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  const net::Nonce n = net::random_nonce();
  return fmt::format("{}:{}:{:02x}", host, ::getpid(), fmt::join(n.begin(), n.begin() + 6, ""));
}

std::string rank_key(int r) { return fmt::format("rendezvous/rank/{}", r); }

void register_and_wait(Store& store, const RendezvousOptions& opt, net::Deadline deadline, const std::string& where) {
  const int rank = opt.rank;
  const int world = opt.world_size;
  const std::string leftover = opt.init_method.starts_with("file://")
                                   ? " (or the store file is left over from an earlier job: remove it)"
                                   : "";

  const std::string ws = std::to_string(world);
  const std::string agreed = store.compare_set("rendezvous/world_size", "", ws);
  if (agreed != ws) {
    THD_THROW_AT(ValueError, kOp, rank, -1,
                 "this rank was started with world_size {}, but another rank registered world_size {}: every "
                 "process must be given the same world_size{}",
                 world, agreed, leftover);
  }

  const std::string me = identity();
  const std::string holder = store.compare_set(rank_key(rank), "", me);
  if (holder != me) {
    THD_THROW_AT(ValueError, kOp, rank, -1,
                 "rank {} was claimed twice: by {} and by this process ({}); give each process its own rank{}", rank,
                 holder, me, leftover);
  }

  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) keys.push_back(rank_key(r));
  const auto left = std::chrono::ceil<milliseconds>(std::max(deadline - net::Clock::now(), net::Clock::duration{}));
  try {
    store.wait(keys, deadline == net::Deadline::max() ? milliseconds::max() : left);
  } catch (const TimeoutError& e) {
    std::vector<int> absent;
    try {
      // Only to name the missing ranks: a store that did not answer the wait (it
      // is stalled) must not hold this rank for another whole timeout.
      store.set_timeout(std::min(opt.timeout, kDiagnosisTimeout));
      for (int r = 0; r < world; ++r) {
        if (!store.check({rank_key(r)})) absent.push_back(r);
      }
    } catch (const Error& lost) {
      // The store went away too (rank 0 gave up first): say what is known.
      THD_THROW_AT(TimeoutError, kOp, rank, -1, "not every rank joined within {} ms ({}), and then {} "
                   "became unreachable ({}) (init_method {})", opt.timeout.count(), e.message(), where, lost.what(),
                   opt.init_method);
    }
    THD_THROW_AT(TimeoutError, kOp, rank, -1,
                 "{} of {} ranks did not join within {} ms: rank{} {} never arrived (init_method {}, {})", absent.size(),
                 world, opt.timeout.count(), absent.size() == 1 ? "" : "s", fmt::join(absent, ", "),
                 opt.init_method, where);
  }
}

// The backend whose rendezvous this is (mpi://), when the init_method names its
// scheme or when env:// has no MASTER_ADDR in a process that backend's launcher
// started. Decided from the catalog and the environment: nothing is loaded.
const detail::KnownBackend* backend_scheme(const RendezvousOptions& opt, const net::EnvLookup& env) {
  const std::string& url = opt.init_method;
  const size_t sep = url.find("://");
  if (sep == std::string::npos) return nullptr;
  const std::string scheme = url.substr(0, sep);
  if (const detail::KnownBackend* owner = detail::rendezvous_backend(scheme)) {
    THD_CHECK(owner->built, ValueError, kOp,
              "init_method '{}' needs the {} backend, which this thd was built without (configure with -D{}=ON "
              "with {} installed)",
              url, owner->name, owner->option, owner->requires_);
    THD_CHECK(sep + 3 == url.size(), ValueError, kOp, "init_method '{}': {}:// takes nothing after it", url, scheme);
    return owner;
  }
  if (scheme == "env" && url.size() == sep + 3) {
    auto addr = env("MASTER_ADDR");
    if (!addr || addr->empty()) return detail::launching_backend(env);
  }
  return nullptr;
}

RendezvousResult rendezvous_with_env(RendezvousOptions opt, const net::EnvLookup& env) {
  if (const detail::KnownBackend* owner = backend_scheme(opt, env)) {
    const detail::BackendRegistration& backend = detail::find_backend(std::string(owner->name));
    THD_CHECK(backend.rendezvous != nullptr, ValueError, kOp, "the {} backend declares the rendezvous {}:// but has none",
              owner->name, owner->rendezvous_scheme);
    RendezvousResult joined = backend.rendezvous(opt);
    joined.store->set_timeout(opt.timeout);
    return joined;
  }
  const net::Deadline deadline = net::deadline_after(opt.timeout);
  const Target target = resolve(opt, env);
  std::shared_ptr<Store> store = open_store(target, opt);
  const std::string where = store_name(target);
  // The store failing under the ranks (its host died, or stalls) is named as such;
  // the rendezvous's own errors say what they mean already.
  try {
    register_and_wait(*store, opt, deadline, where);
  } catch (const PeerLost& e) {
    rethrow_at_rank(e, opt.rank, fmt::format("rank {} lost {} while the ranks were joining (has the process "
                                             "hosting it died?)", opt.rank, where));
  } catch (const ConnectionError& e) {
    rethrow_at_rank(e, opt.rank, fmt::format("rank {} lost {} while the ranks were joining", opt.rank, where));
  } catch (const TimeoutError& e) {
    if (e.context().op == kOp) throw;
    rethrow_at_rank(e, opt.rank, fmt::format("{} did not answer rank {} while the ranks were joining", where, opt.rank));
  }
  store->set_timeout(opt.timeout);
  return {std::move(store), opt.rank, opt.world_size};
}

}  // namespace

RendezvousResult rendezvous(const RendezvousOptions& options) { return rendezvous_with_env(options, net::process_env); }

namespace detail {

std::string_view rendezvous_launcher(const RendezvousOptions& options, const net::EnvLookup& env) {
  if (const detail::KnownBackend* owner = backend_scheme(options, env)) return owner->launcher;
  if (options.init_method != "env://" || options.rank >= 0) return {};
  const auto rank = env("RANK");
  const auto task = env("SLURM_PROCID");
  if ((!rank || rank->empty()) && task && !task->empty()) return "srun";
  return {};
}

}  // namespace detail

RendezvousResult rendezvous(const std::string& init_method, int rank, int world_size, milliseconds timeout) {
  RendezvousOptions o;
  o.init_method = init_method;
  o.rank = rank;
  o.world_size = world_size;
  o.timeout = timeout;
  return rendezvous(o);
}

}  // namespace thd
