// The serving side of the pool protocol (protocol/pool_store.h). An idle worker
// polls pool/active; a session id it has not seen yet is one to join (unless it
// is already ending, or an earlier process of this node took part in it). After
// the session, the worker marks itself finished, and the last node to finish
// releases the pool for the next master.
#include "worker/pool.h"

#include <unistd.h>

#include <random>
#include <thread>

#include <thd/datachannel.h>
#include <thd/memory.h>
#include <thd/store.h>

#include "datachannel/check.h"
#include "protocol/pool_store.h"
#include "tensor/log.h"

namespace thd::worker {
namespace {

using std::chrono::milliseconds;

constexpr const char* kOp = "serve_pool";
// The master writes the config before it claims the pool, so it is there; the
// wait only covers a store that answers slowly.
constexpr milliseconds kConfigWait{5000};
// What a finished/<node> value may hold: enough for an error's first line.
constexpr size_t kMaxOutcomeBytes = 512;
// Once connected, how long one store request (or reconnecting for it) may take:
// a store that is gone ends the worker within this, not after connect_timeout.
constexpr milliseconds kStoreRequestTimeout{5000};

// "host:pid:nonce": tells this process apart from an earlier one of the same node.
std::string process_identity() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::random_device random;
  return fmt::format("{}:{}:{:08x}", host, ::getpid(), random());
}

void check_options(const PoolOptions& o) {
  THD_CHECK(o.num_nodes >= 1 && o.num_nodes <= pool::kMaxNodes, ValueError, kOp,
            "a pool has 1 to {} nodes, got {}", pool::kMaxNodes, o.num_nodes);
  THD_CHECK(o.node >= 0 && o.node < o.num_nodes, ValueError, kOp, "node {} is not in 0..{} (a pool of {} nodes)",
            o.node, o.num_nodes - 1, o.num_nodes);
  THD_CHECK(o.connect_timeout.count() >= 0 && o.poll_interval.count() > 0, ValueError, kOp,
            "connect_timeout must be >= 0 and poll_interval > 0 ms");
}

class PoolWorker {
 public:
  explicit PoolWorker(const PoolOptions& options) : o_(options), identity_(process_identity()) {
    const pool::PoolAddress address = pool::parse_pool_url(o_.pool_url, kOp);
    TCPStoreOptions so;
    so.host = address.host;
    so.port = address.port;
    so.is_server = o_.host_store;
    so.wait_for_workers = false;
    so.timeout = o_.connect_timeout;
    so.token = o_.token;
    store_ = std::make_shared<TCPStore>(std::move(so));
    store_->set_timeout(kStoreRequestTimeout);
    join_pool();
  }

  void run() {
    try {
      serve_sessions();
    } catch (const ConnectionError& e) {
      store_lost(e);
    } catch (const TimeoutError& e) {
      store_lost(e);
    }
  }

 private:
  [[noreturn]] void store_lost(const Error& e) {
    THD_THROW(ConnectionError, kOp, "lost the pool's store at {} (the pool has ended?): {}", o_.pool_url, e.what());
  }

  void serve_sessions() {
    std::optional<uint64_t> last;  // the last session this process took up
    for (;;) {
      if (o_.stop != nullptr && o_.stop->load()) return;
      const std::optional<uint64_t> active = pool::parse_active(read_active(), kOp);
      if (active && active != last) {
        take_up(*active);
        last = active;
        continue;
      }
      std::this_thread::sleep_for(o_.poll_interval);
    }
  }

  // The pool's size is agreed once; every worker must have been told the same.
  void join_pool() {
    const std::string nodes = std::to_string(o_.num_nodes);
    const std::string agreed = store_->compare_set(pool::kSizeKey, "", nodes);
    THD_CHECK(agreed == nodes, ValueError, kOp, "this worker was started for a pool of {} nodes, but the pool at {} "
              "has {}", o_.num_nodes, o_.pool_url, agreed.substr(0, 16));
    store_->set(pool::worker_key(o_.node), identity_);
  }

  std::string read_active() {
    return store_->check({pool::kActiveKey}) ? store_->get_string(pool::kActiveKey) : std::string();
  }

  bool is_ending(uint64_t session) {
    if (store_->check({pool::detached_key(session)})) return true;
    for (const std::string& key : pool::finished_keys(session, o_.num_nodes)) {
      if (store_->check({key})) return true;
    }
    return false;
  }

  // Serves `session` if this process can still take part in it, then finishes it.
  void take_up(uint64_t session) {
    if (is_ending(session)) {
      finish(session, "skipped: the session was ending before this worker came to it");
      return;
    }
    if (store_->compare_set(pool::joined_key(session, o_.node), "", identity_) != identity_) {
      // An earlier process of this node (one that died) took part: its peers have
      // written it off, and the session must not wait for this one.
      finish(session, "skipped: an earlier process of this node served it");
      return;
    }
    if (read_active() != std::to_string(session)) {
      // Released (and forgotten) between the look at pool/active and the claim
      // above: every node, this one included, is done with it already.
      store_->delete_key(pool::joined_key(session, o_.node));
      return;
    }
    if (o_.on_session_begin) o_.on_session_begin(session);
    std::string how;
    try {
      how = session_end_name(serve_session(session));
    } catch (const std::exception& e) {
      how = std::string("error: ") + e.what();
      THD_LOG_WARN("thd-worker node {}: session {} ended with {}", o_.node, session, how);
    }
    // The session's tensors are freed by now; the allocator's cache of them goes
    // back to the system too, so an idle pool does not keep the last master's peak.
    empty_cache(Device::cpu());
    finish(session, how);
    if (o_.on_session_end) o_.on_session_end(session, how);
  }

  SessionEnd serve_session(uint64_t session) {
    const std::vector<uint8_t> text = store_->get(pool::config_key(session), kConfigWait);
    const pool::SessionConfig config = pool::decode_config(std::string(text.begin(), text.end()), kOp);
    DataChannelOptions dco;
    auto channel_store = std::make_shared<PrefixStore>(pool::channel_prefix(session), store_);
    channel_store->set_timeout(config.timeout);  // the rendezvous waits as long as the master does
    dco.store = channel_store;
    dco.rank = o_.node + 1;
    dco.world_size = o_.num_nodes + 1;
    dco.timeout = config.timeout;
    dco.token = o_.token;
    dco.bind_host = o_.bind_host;
    std::shared_ptr<DataChannel> channel = DataChannel::create(config.backend, dco);
    const SessionEnd end = serve(channel);
    channel->shutdown();
    return end;
  }

  void finish(uint64_t session, std::string how) {
    if (how.size() > kMaxOutcomeBytes) how.resize(kMaxOutcomeBytes);
    store_->set(pool::finished_key(session, o_.node), how);
    if (!store_->check(pool::finished_keys(session, o_.num_nodes))) return;
    // Every node is done: release the pool, unless a node that finished at the
    // same moment already did (and a new session may hold it by now).
    if (!store_->compare_set(pool::kActiveKey, std::to_string(session), "").empty()) return;
    forget(session);
  }

  // The session's bookkeeping (its DataChannel's few keys stay: the store has no
  // way to list them).
  void forget(uint64_t session) {
    store_->delete_key(pool::config_key(session));
    store_->delete_key(pool::detached_key(session));
    for (int i = 0; i < o_.num_nodes; ++i) {
      store_->delete_key(pool::joined_key(session, i));
      store_->delete_key(pool::finished_key(session, i));
    }
  }

  const PoolOptions& o_;
  const std::string identity_;
  std::shared_ptr<TCPStore> store_;
};

}  // namespace

void serve_pool(const PoolOptions& options) {
  check_options(options);
  PoolWorker(options).run();
}

}  // namespace thd::worker
