// The claiming side of the pool protocol (protocol/pool_store.h): draw a session
// id, publish the session's config, compare_set pool/active from free to that id.
// A pool held by someone else is either busy (its master is live) or ending (the
// workers are finishing it); either way the claim waits for the release, up to the
// master's timeout.
#include "master/pool_attach.h"

#include <atomic>
#include <cstdlib>
#include <thread>

#include "datachannel/check.h"
#include "protocol/pool_store.h"
#include "tensor/log.h"

namespace thd::master {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kOp = "attach_to_pool";
// How often a claim looks at a held pool again.
constexpr milliseconds kPollInterval{10};
// How long a reachable store may lack pool/size before it is taken for something
// other than a pool (the host sets it right after the store comes up).
constexpr milliseconds kSizeWait{5000};
// Once connected, how long one store request (or reconnecting for it) may take:
// detaching from a pool that is gone must not hold shutdown() for options.timeout.
constexpr milliseconds kStoreRequestTimeout{5000};

milliseconds left_until(Clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::ceil<milliseconds>(deadline - Clock::now()));
}

// Adds where the master was going to an error from the store, keeping its type.
template <typename E>
[[noreturn]] void rethrow_reaching(const E& e, const std::string& url) {
  ErrorContext ctx = e.context();
  ctx.op = kOp;
  throw E(fmt::format("cannot reach the worker pool at {}: {}{}", url,
                      e.context().op.empty() ? "" : e.context().op + ": ", e.message()),
          std::move(ctx));
}

std::shared_ptr<TCPStore> connect(const pool::PoolAddress& address, const std::string& url,
                                  const MasterWorkerOptions& options) {
  TCPStoreOptions o;
  o.host = address.host;
  o.port = address.port;
  o.is_server = false;
  o.timeout = options.timeout;
  o.token = options.token;
  try {
    return std::make_shared<TCPStore>(std::move(o));
  } catch (const TimeoutError& e) {
    rethrow_reaching(e, url);
  } catch (const AuthError& e) {
    rethrow_reaching(e, url);
  } catch (const PeerLost& e) {
    rethrow_reaching(e, url);
  } catch (const ConnectionError& e) {
    rethrow_reaching(e, url);
  }
}

int read_pool_size(Store& store, const std::string& url, Clock::time_point deadline) {
  try {
    const std::vector<uint8_t> size = store.get(pool::kSizeKey, std::min(kSizeWait, left_until(deadline)));
    return pool::parse_size(std::string(size.begin(), size.end()), kOp);
  } catch (const TimeoutError&) {
    THD_THROW(ValueError, kOp,
              "{} answers, but it is not a worker pool (its store has no '{}'): start one with `thdrun --pool -n N "
              "--listen HOST:PORT` or thd-worker; for an SPMD job, give rank and world_size",
              url, pool::kSizeKey);
  }
}

std::string current_holder(Store& store) {
  return store.check({pool::kActiveKey}) ? store.get_string(pool::kActiveKey) : std::string();
}

// The session's master detached, or a node already finished it (a node only
// finishes a session whose master said Goodbye or was lost).
bool is_ending(Store& store, uint64_t session, int nodes) {
  if (store.check({pool::detached_key(session)})) return true;
  for (const std::string& key : pool::finished_keys(session, nodes)) {
    if (store.check({key})) return true;
  }
  return false;
}

std::vector<int> unfinished_nodes(Store& store, uint64_t session, int nodes) {
  std::vector<int> out;
  for (int i = 0; i < nodes; ++i) {
    if (!store.check({pool::finished_key(session, i)})) out.push_back(i);
  }
  return out;
}

// A master that waits silently looks hung, so the line that says why shows at the
// default level (only THD_LOG_LEVEL=off hides it).
void say_waiting(const std::string& url, uint64_t session, milliseconds timeout) {
  if (::thd::detail::log_level() == ::thd::detail::LogLevel::Off) return;
  ::thd::detail::log_write(::thd::detail::LogLevel::Warn,
                    fmt::format("init_master_worker: the worker pool at {} serves another master (session {}); "
                                "waiting for it to finish, up to {} ms (MasterWorkerOptions::timeout)",
                                url, session, timeout.count()));
}

// Returns once `holder` no longer holds the pool, waiting its turn as a job queue
// would. At the deadline: TimeoutError, "pool busy" when the holder is live, or
// naming the nodes still ending its session.
void wait_for_release(Store& store, const std::string& holder, int nodes, const std::string& url,
                      Clock::time_point deadline, milliseconds timeout, bool& said_waiting) {
  const uint64_t session = *pool::parse_active(holder, kOp);
  bool ending = false;
  for (;;) {
    if (current_holder(store) != holder) return;
    ending = ending || is_ending(store, session, nodes);
    if (!ending && !said_waiting) {
      say_waiting(url, session, timeout);
      said_waiting = true;
    }
    if (Clock::now() >= deadline) {
      if (!ending) {
        THD_THROW(TimeoutError, kOp,
                  "pool busy: the worker pool at {} still serves another master (session {}) after {} ms; attach "
                  "once that master has called thd::shutdown() or exited, or wait longer (MasterWorkerOptions::"
                  "timeout)",
                  url, session, timeout.count());
      }
      THD_THROW(TimeoutError, kOp,
                "the worker pool at {} is still ending session {} after {} ms: node(s) {} have not finished it "
                "(is every thd-worker of the pool running?)",
                url, session, timeout.count(), fmt::join(unfinished_nodes(store, session, nodes), ", "));
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

// Marks the session detached once, however many copies of the closure call it.
struct Detacher {
  std::shared_ptr<Store> store;
  uint64_t session;
  std::atomic<bool> done{false};

  void operator()() noexcept {
    if (done.exchange(true)) return;
    try {
      store->set(pool::detached_key(session), "1");
    } catch (const std::exception& e) {
      // The pool (or its store) is gone: nobody is left to tell.
      THD_LOG_WARN("attach_to_pool: could not mark session {} detached: {}", session, e.what());
    }
  }
};

}  // namespace

bool names_a_pool(const MasterWorkerOptions& options) {
  const char* rank = std::getenv("RANK");
  return options.init_method.starts_with("tcp://") && options.rank < 0 && (rank == nullptr || *rank == '\0');
}

PoolSession attach_to_pool(const MasterWorkerOptions& options) {
  THD_CHECK(names_a_pool(options), ValueError, kOp,
            "init_method '{}' with rank {} does not name a worker pool (tcp://host:port, no rank, no RANK in the "
            "environment)",
            options.init_method, options.rank);
  THD_CHECK(options.timeout.count() >= 0, ValueError, kOp, "timeout must be >= 0 ms, got {} ms",
            options.timeout.count());
  const std::string& url = options.init_method;
  const pool::PoolAddress address = pool::parse_pool_url(url, kOp);
  const auto deadline = Clock::now() + options.timeout;

  std::shared_ptr<TCPStore> store = connect(address, url, options);
  store->set_timeout(kStoreRequestTimeout);
  const int nodes = read_pool_size(*store, url, deadline);
  THD_CHECK(options.world_size < 0 || options.world_size == nodes + 1, ValueError, kOp,
            "world_size {} asks for {} worker(s), but the pool at {} has {} (leave world_size unset to take the "
            "pool's)",
            options.world_size, options.world_size - 1, url, nodes);

  const std::string config = pool::encode_config({.backend = options.backend, .timeout = options.timeout});
  uint64_t session = 0;
  bool said_waiting = false;
  for (;;) {
    // A fresh id for every attempt: workers tell sessions apart by id, so one that
    // was served while this master waited must never come back.
    session = static_cast<uint64_t>(store->add(pool::kNextSessionKey, 1));
    const std::string id = std::to_string(session);
    store->set(pool::config_key(session), config);
    const std::string holder = store->compare_set(pool::kActiveKey, "", id);
    if (holder == id) break;
    store->delete_key(pool::config_key(session));
    wait_for_release(*store, holder, nodes, url, deadline, options.timeout, said_waiting);
  }
  THD_LOG_INFO("attach_to_pool: session {} of the pool at {} ({} nodes)", session, url, nodes);

  PoolSession s;
  auto channel_store = std::make_shared<PrefixStore>(pool::channel_prefix(session), store);
  channel_store->set_timeout(options.timeout);  // the rendezvous waits, as in an SPMD launch
  s.store = channel_store;
  s.world_size = nodes + 1;
  s.session = session;
  auto detacher = std::make_shared<Detacher>(store, session);
  s.detach = [detacher] { (*detacher)(); };
  return s;
}

}  // namespace thd::master
