// TCPStore: the client side (every process), and the server (rank 0) it may host.
#include <thd/store.h>

#include <algorithm>
#include <mutex>

#include "datachannel/check.h"
#include "datachannel/net/auth.h"
#include "datachannel/net/socket.h"
#include "datachannel/store/store_util.h"
#include "datachannel/store/tcp_store_server.h"
#include "datachannel/store/tcp_store_wire.h"

namespace thd {

namespace wire = detail::store_wire;
using std::chrono::milliseconds;

namespace {

// How long a client waits for the reply of a get/wait past the time the server
// was asked to wait: the server answers Timeout itself at its deadline, so this
// only covers scheduling and transfer. A tenth of the wait, within these bounds: a
// stalled server holds its client little longer than the timeout it asked for.
constexpr milliseconds kMinReplyGrace{100};
constexpr milliseconds kMaxReplyGrace{5000};

milliseconds reply_grace(milliseconds server_wait) {
  return std::clamp(server_wait / 10, kMinReplyGrace, kMaxReplyGrace);
}

milliseconds saturating_add(milliseconds a, milliseconds b) {
  return a > milliseconds::max() - b ? milliseconds::max() : a + b;
}

}  // namespace

struct TCPStore::Impl {
  TCPStoreOptions options;
  net::AuthToken token;
  uint16_t port = 0;
  // Declared before the client socket so it is destroyed after it: the server
  // process's own client disconnects before its server stops.
  std::unique_ptr<detail::TCPStoreServer> server;

  std::mutex mu;  // one request in flight on `sock` at a time
  net::Socket sock;
  bool joined = false;

  Impl(TCPStoreOptions opts, net::AuthToken tok) : options(std::move(opts)), token(std::move(tok)) {}

  std::string endpoint() const { return net::format_endpoint(options.host, port); }

  // (Re)connects and authenticates; the first successful connection also joins.
  void connect_locked(net::Deadline deadline, const char* op) {
    net::Socket s = net::connect_authenticated(options.host, port, token, deadline, op);
    sock = std::move(s);
    if (!joined) {
      wire::Request join;
      join.command = wire::Command::Join;
      exchange_locked(join, deadline, deadline, op);
      joined = true;
    }
  }

  wire::Reply exchange_locked(const wire::Request& req, net::Deadline send_deadline, net::Deadline reply_deadline,
                              const char* op) {
    const wire::Bytes frame = wire::encode_request(req);
    THD_CHECK(frame.size() - wire::kLengthBytes <= wire::kMaxMessageBytes, ValueError, op,
              "the request is {} bytes; the store accepts messages of at most {} bytes (key and value "
              "included)",
              frame.size() - wire::kLengthBytes, wire::kMaxMessageBytes);
    try {
      sock.send_all(frame, send_deadline, op);
      uint8_t prefix[wire::kLengthBytes];
      sock.recv_exact(prefix, reply_deadline, op);
      const uint32_t len = wire::decode_length(prefix);
      THD_CHECK(len > 0 && len <= wire::kMaxMessageBytes, ConnectionError, op,
                "the store server at {} sent a reply of {} bytes; not a thd store?", endpoint(), len);
      wire::Bytes body(len);
      sock.recv_exact(body, reply_deadline, op);
      wire::Reply reply;
      std::string why;
      THD_CHECK(wire::decode_reply(req.command, body, &reply, &why), ConnectionError, op,
                "the store server at {} sent a malformed {} reply: {}", endpoint(), wire::command_name(req.command),
                why);
      return reply;
    } catch (const Error&) {
      // The stream is out of step (or gone): never reuse it. The next call reconnects.
      sock.close();
      throw;
    }
  }

  // One request and its reply. `server_wait` is how long the server may park it
  // (get/wait); the reply deadline allows that much more.
  wire::Reply call(const wire::Request& req, milliseconds store_timeout, std::optional<milliseconds> server_wait,
                   const char* op) {
    std::lock_guard lock(mu);
    const net::Deadline deadline = net::deadline_after(store_timeout);
    if (!sock.valid()) connect_locked(deadline, op);
    const net::Deadline reply_deadline =
        server_wait ? net::deadline_after(saturating_add(*server_wait, reply_grace(*server_wait))) : deadline;
    wire::Reply reply = exchange_locked(req, deadline, reply_deadline, op);
    THD_CHECK(reply.status != wire::Status::Error, ValueError, op, "{}", reply.message);
    THD_CHECK(reply.status == wire::Status::Ok || server_wait.has_value(), ConnectionError, op,
              "the store server at {} answered {} with a timeout", endpoint(), wire::command_name(req.command));
    return reply;
  }
};

TCPStore::TCPStore(TCPStoreOptions options) : Store(options.timeout) {
  THD_CHECK(options.timeout.count() >= 0, ValueError, "TCPStore", "timeout must be >= 0 ms, got {} ms",
            options.timeout.count());
  THD_CHECK(!options.world_size || *options.world_size >= 1, ValueError, "TCPStore",
            "world_size must be >= 1, got {}", options.world_size.value_or(0));
  THD_CHECK(options.is_server || options.port != 0, ValueError, "TCPStore",
            "a client needs the server's port, and options.port is 0 (only a server may pick its port)");
  net::AuthToken token = net::resolve_auth_token(options.token, "TCPStore");
  if (options.token) net::wipe(*options.token);  // keep one copy of the secret: the one that wipes itself
  options.token.reset();
  impl_ = std::make_unique<Impl>(std::move(options), std::move(token));
  Impl& im = *impl_;
  im.port = im.options.port;
  if (im.options.is_server) {
    im.server = std::make_unique<detail::TCPStoreServer>(im.options.host, im.options.port, im.token,
                                                         im.options.handshake_timeout);
    im.port = im.server->port();
  }
  const net::Deadline deadline = net::deadline_after(im.options.timeout);
  {
    std::lock_guard lock(im.mu);
    im.connect_locked(deadline, "TCPStore");
  }
  if (im.options.is_server && im.options.world_size && im.options.wait_for_workers) {
    const int want = *im.options.world_size;
    const int joined = im.server->wait_for_joined(want, deadline);
    THD_CHECK(joined >= want, TimeoutError, "TCPStore",
              "only {} of {} processes connected to the store at {} within {} ms", joined, want, im.endpoint(),
              im.options.timeout.count());
  }
}

TCPStore::~TCPStore() = default;

const std::string& TCPStore::host() const noexcept { return impl_->options.host; }
uint16_t TCPStore::port() const noexcept { return impl_->port; }
bool TCPStore::is_server() const noexcept { return impl_->options.is_server; }

void TCPStore::do_set(const std::string& key, const std::vector<uint8_t>& value) {
  wire::Request r;
  r.command = wire::Command::Set;
  r.key = key;
  r.value = value;
  impl_->call(r, timeout(), std::nullopt, "store.set");
}

std::vector<uint8_t> TCPStore::do_get(const std::string& key, milliseconds timeout) {
  wire::Request r;
  r.command = wire::Command::Get;
  r.key = key;
  r.timeout_ms = static_cast<uint64_t>(timeout.count());
  wire::Reply reply = impl_->call(r, this->timeout(), timeout, "store.get");
  if (reply.status == wire::Status::Timeout) detail::throw_get_timeout(key, timeout);
  return std::move(reply.value);
}

int64_t TCPStore::do_add(const std::string& key, int64_t delta) {
  wire::Request r;
  r.command = wire::Command::Add;
  r.key = key;
  r.delta = delta;
  return impl_->call(r, timeout(), std::nullopt, "store.add").integer;
}

std::vector<uint8_t> TCPStore::do_compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                              const std::vector<uint8_t>& desired) {
  wire::Request r;
  r.command = wire::Command::CompareSet;
  r.key = key;
  r.expected = expected;
  r.value = desired;
  return std::move(impl_->call(r, timeout(), std::nullopt, "store.compare_set").value);
}

void TCPStore::do_wait(const std::vector<std::string>& keys, milliseconds timeout) {
  wire::Request r;
  r.command = wire::Command::Wait;
  r.keys = keys;
  r.timeout_ms = static_cast<uint64_t>(timeout.count());
  wire::Reply reply = impl_->call(r, this->timeout(), timeout, "store.wait");
  if (reply.status == wire::Status::Timeout) detail::throw_wait_timeout(reply.keys, keys.size(), timeout);
}

bool TCPStore::do_check(const std::vector<std::string>& keys) {
  wire::Request r;
  r.command = wire::Command::Check;
  r.keys = keys;
  return impl_->call(r, timeout(), std::nullopt, "store.check").integer != 0;
}

bool TCPStore::do_delete_key(const std::string& key) {
  wire::Request r;
  r.command = wire::Command::DeleteKey;
  r.key = key;
  return impl_->call(r, timeout(), std::nullopt, "store.delete_key").integer != 0;
}

int64_t TCPStore::do_num_keys() {
  wire::Request r;
  r.command = wire::Command::NumKeys;
  return impl_->call(r, timeout(), std::nullopt, "store.num_keys").integer;
}

}  // namespace thd
