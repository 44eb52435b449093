// The rendezvous Store: a small key-value store the processes of a job share to
// find each other (torch.distributed's Store). Backends exchange addresses through
// it; process groups agree on ids through it.
//
// Contract (every implementation, docs/store.md):
// - Keys are strings, values are bytes. Counters (add) are stored as decimal text,
//   so add(k, 1) then get(k) reads "1".
// - set, add, compare_set, check, delete_key and num_keys never wait for other
//   processes. get and wait block until the keys are set or the timeout passes,
//   then throw thd::TimeoutError naming the keys still missing.
// - Every method may be called from several threads at once.
// - Errors: TimeoutError (a wait ran out), ValueError (add on a value that is not
//   an integer, or that would overflow), ConnectionError/PeerLost (TCPStore lost
//   its server), AuthError (TCPStore: the token was refused or is missing).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace thd {

// torch's default store timeout.
inline constexpr std::chrono::milliseconds kDefaultStoreTimeout = std::chrono::minutes(5);

class Store {
 public:
  virtual ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Sets key to value, replacing what was there, and wakes every get/wait on it.
  void set(const std::string& key, const std::vector<uint8_t>& value);
  void set(const std::string& key, std::string_view value);

  // The value of key, waiting until some process sets it, for at most timeout()
  // (or the given timeout). TimeoutError naming the key after that.
  std::vector<uint8_t> get(const std::string& key);
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout);
  std::string get_string(const std::string& key);

  // Atomically adds delta to the integer stored at key (a missing key counts as 0)
  // and returns the result, stored as decimal text. ValueError if the value there
  // is not a decimal integer or the sum overflows int64.
  int64_t add(const std::string& key, int64_t delta);

  // Atomically: if key holds `expected`, or key is missing and `expected` is empty,
  // sets key to `desired`. Returns the value stored afterwards, so the swap took
  // place iff the result equals `desired`. As in torch, a missing key with a
  // nonempty `expected` stores nothing and returns `expected`.
  std::vector<uint8_t> compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                   const std::vector<uint8_t>& desired);
  std::string compare_set(const std::string& key, std::string_view expected, std::string_view desired);

  // Blocks until every key is set, for at most timeout() (or the given timeout);
  // TimeoutError naming the keys still missing after that.
  void wait(const std::vector<std::string>& keys);
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  // True iff every key is set, without waiting.
  bool check(const std::vector<std::string>& keys);

  // Removes key; true iff it was there.
  bool delete_key(const std::string& key);

  // How many keys are set.
  int64_t num_keys();

  // The default timeout of get and wait, and of TCPStore's connection attempts.
  std::chrono::milliseconds timeout() const noexcept { return timeout_.load(); }
  void set_timeout(std::chrono::milliseconds timeout) noexcept { timeout_.store(timeout); }

 protected:
  explicit Store(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  // The operations, implemented by each store. The public methods above check and
  // convert arguments and then call these; `timeout` is already resolved.
  virtual void do_set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  virtual std::vector<uint8_t> do_get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  virtual int64_t do_add(const std::string& key, int64_t delta) = 0;
  virtual std::vector<uint8_t> do_compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                              const std::vector<uint8_t>& desired) = 0;
  virtual void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  virtual bool do_check(const std::vector<std::string>& keys) = 0;
  virtual bool do_delete_key(const std::string& key) = 0;
  virtual int64_t do_num_keys() = 0;

 private:
  std::atomic<std::chrono::milliseconds> timeout_;
};

// ---- TCPStore ---------------------------------------------------------------------

struct TCPStoreOptions {
  // Where the server listens and clients connect. Loopback unless told otherwise:
  // the store is reachable from wherever the server binds.
  std::string host = "127.0.0.1";
  // 0 with is_server: the server picks a free port (read it back with port()).
  uint16_t port = 0;
  // This process hosts the server (rank 0). It is also a client, like every rank.
  bool is_server = false;
  // With is_server and wait_for_workers: the constructor returns only once this
  // many clients (the server's own included) have connected, as torch does.
  std::optional<int> world_size = std::nullopt;
  bool wait_for_workers = true;
  // get/wait default timeout, and how long clients retry connecting to a server
  // that is not up yet.
  std::chrono::milliseconds timeout = kDefaultStoreTimeout;
  // The shared secret; when unset, THD_AUTH_TOKEN or THD_AUTH_TOKEN_FILE.
  std::optional<std::string> token = std::nullopt;
  // Server: how long a new connection has to complete the auth handshake.
  std::chrono::milliseconds handshake_timeout = std::chrono::seconds(5);
};

// A store served over TCP by one process (rank 0) to every process of the job.
// Every connection proves the shared token (HMAC challenge-response, see
// docs/store.md) before the server reads anything else from it. One client
// connection per TCPStore object; calls on one object are serialized over it.
class TCPStore final : public Store {
 public:
  // Starts the server (is_server) and connects this process's client, retrying
  // until options.timeout while the server is not up yet. Throws AuthError when no
  // token can be found or the server refuses it, TimeoutError when no server
  // answers in time, ConnectionError when the server cannot bind its port.
  explicit TCPStore(TCPStoreOptions options);
  // Closes the client; on the server, stops serving: every other client's pending
  // and later calls fail with PeerLost or ConnectionError.
  ~TCPStore() override;

  const std::string& host() const noexcept;
  // The server's port: the one it bound when options.port was 0.
  uint16_t port() const noexcept;
  bool is_server() const noexcept;

 protected:
  void do_set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> do_get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t do_add(const std::string& key, int64_t delta) override;
  std::vector<uint8_t> do_compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                      const std::vector<uint8_t>& desired) override;
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool do_check(const std::vector<std::string>& keys) override;
  bool do_delete_key(const std::string& key) override;
  int64_t do_num_keys() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- FileStore --------------------------------------------------------------------

// A store in a file that processes on one host (or on a shared filesystem with
// working flock) open by path. The file is created mode 0600. With world_size > 0
// the last of world_size FileStore objects to be destroyed removes the file, so the
// next job with the same path starts empty (as torch's FileStore).
class FileStore final : public Store {
 public:
  explicit FileStore(std::string path, int world_size = -1,
                     std::chrono::milliseconds timeout = kDefaultStoreTimeout);
  ~FileStore() override;

  const std::string& path() const noexcept;

 protected:
  void do_set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> do_get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t do_add(const std::string& key, int64_t delta) override;
  std::vector<uint8_t> do_compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                      const std::vector<uint8_t>& desired) override;
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool do_check(const std::vector<std::string>& keys) override;
  bool do_delete_key(const std::string& key) override;
  int64_t do_num_keys() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- HashStore --------------------------------------------------------------------

// An in-process store, for ranks run as threads of one process (tests).
class HashStore final : public Store {
 public:
  explicit HashStore(std::chrono::milliseconds timeout = kDefaultStoreTimeout);
  ~HashStore() override;

 protected:
  void do_set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> do_get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t do_add(const std::string& key, int64_t delta) override;
  std::vector<uint8_t> do_compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                      const std::vector<uint8_t>& desired) override;
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool do_check(const std::vector<std::string>& keys) override;
  bool do_delete_key(const std::string& key) override;
  int64_t do_num_keys() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- PrefixStore ------------------------------------------------------------------

// A view of `store` in which every key is "<prefix>/<key>": groups and backends
// each get a namespace in the job's one store. num_keys counts the whole
// underlying store (as torch). Its timeout starts as the underlying store's.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);
  ~PrefixStore() override;

  const std::string& prefix() const noexcept { return prefix_; }
  const std::shared_ptr<Store>& underlying() const noexcept { return store_; }

 protected:
  void do_set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> do_get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t do_add(const std::string& key, int64_t delta) override;
  std::vector<uint8_t> do_compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                      const std::vector<uint8_t>& desired) override;
  void do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool do_check(const std::vector<std::string>& keys) override;
  bool do_delete_key(const std::string& key) override;
  int64_t do_num_keys() override;

 private:
  std::string prefixed(const std::string& key) const;
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> store_;
};

// ---- rendezvous -------------------------------------------------------------------

struct RendezvousOptions {
  // env:// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the environment),
  // tcp://host:port, or file:///absolute/path.
  std::string init_method = "env://";
  // -1: from the environment (env://); required for tcp:// and file://. With env://
  // a value given here must agree with the environment's.
  int rank = -1;
  int world_size = -1;
  // For connecting to the store and for waiting until every rank has joined; also
  // the returned store's timeout.
  std::chrono::milliseconds timeout = kDefaultStoreTimeout;
  // TCP stores: the shared secret; when unset, THD_AUTH_TOKEN or THD_AUTH_TOKEN_FILE.
  std::optional<std::string> token = std::nullopt;
};

struct RendezvousResult {
  std::shared_ptr<Store> store;
  int rank = -1;
  int world_size = -1;
};

// Connects this process to the job's store (rank 0 hosts it for env:// and
// tcp://), registers this rank, and returns once all world_size ranks have
// registered. Throws ValueError for a malformed init_method, a missing or
// conflicting rank/world_size, a rank claimed twice or a world_size other ranks
// disagree with; TimeoutError naming the ranks that never arrived.
RendezvousResult rendezvous(const RendezvousOptions& options);
RendezvousResult rendezvous(const std::string& init_method, int rank = -1, int world_size = -1,
                            std::chrono::milliseconds timeout = kDefaultStoreTimeout);

}  // namespace thd
