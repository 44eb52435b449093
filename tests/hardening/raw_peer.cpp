#include "raw_peer.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <stdexcept>

#include "datachannel/net/auth.h"
#include "datachannel/tcp/mesh.h"
#include "datachannel/wire.h"

namespace thd::test {

using std::chrono::milliseconds;

namespace {

constexpr milliseconds kConnectWithin{5000};
constexpr const char* kOp = "test.raw_peer";

}  // namespace

net::Socket connect_raw(uint16_t port) {
  return net::Socket::connect("127.0.0.1", port, net::deadline_after(kConnectWithin), kOp);
}

bool send_raw(net::Socket& s, const std::vector<uint8_t>& bytes) {
  try {
    s.send_all(bytes, net::deadline_after(kConnectWithin), kOp);
    return true;
  } catch (const Error&) {
    return false;  // closed (or reset) by the peer
  }
}

std::vector<uint8_t> recv_up_to(net::Socket& s, size_t n, milliseconds within) {
  const net::Deadline deadline = net::deadline_after(within);
  std::vector<uint8_t> out(n);
  size_t got = 0;
  while (got < n) {
    const net::IoResult r = s.recv_some(std::span(out).subspan(got));
    if (r.status == net::IoResult::Status::Ok) {
      got += r.bytes;
      continue;
    }
    if (r.status != net::IoResult::Status::WouldBlock) break;  // closed or reset
    pollfd p{s.fd(), POLLIN, 0};
    if (::poll(&p, 1, net::poll_timeout_ms(deadline)) == 0) break;
  }
  out.resize(got);
  return out;
}

void reset_connection(net::Socket& s) {
  const linger hard{1, 0};
  ::setsockopt(s.fd(), SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
  s.close();
}

// ---- RecordingProxy ----------------------------------------------------------------

struct RecordingProxy::Pair {
  net::Socket client;
  net::Socket server;
  std::vector<uint8_t> from_client;
  bool open = true;
};

RecordingProxy::RecordingProxy(uint16_t target_port)
    : target_port_(target_port), listener_(net::Socket::listen("127.0.0.1", 0, kOp)) {
  port_ = listener_.local_port();
  thread_ = std::thread([this] { run(); });
}

RecordingProxy::~RecordingProxy() {
  stop_.store(true);
  thread_.join();
}

size_t RecordingProxy::connections() const {
  std::lock_guard lock(mu_);
  return pairs_.size();
}

std::vector<uint8_t> RecordingProxy::client_bytes(size_t k) const {
  std::lock_guard lock(mu_);
  if (k >= pairs_.size()) return {};
  return pairs_[k]->from_client;
}

void RecordingProxy::run() {
  // Pumps one direction: false once that side closed (then both are closed).
  auto pump = [](net::Socket& from, net::Socket& to, std::vector<uint8_t>* record) {
    uint8_t buf[64 * 1024];
    for (;;) {
      const net::IoResult r = from.recv_some(buf);
      if (r.status == net::IoResult::Status::WouldBlock) return true;
      if (r.status != net::IoResult::Status::Ok) return false;
      if (record != nullptr) record->insert(record->end(), buf, buf + r.bytes);
      try {
        to.send_all(std::span<const uint8_t>(buf, r.bytes), net::deadline_after(kConnectWithin), kOp);
      } catch (const Error&) {
        return false;
      }
    }
  };
  while (!stop_.load()) {
    std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}};
    std::vector<Pair*> open;
    {
      std::lock_guard lock(mu_);
      for (auto& p : pairs_) {
        if (!p->open) continue;
        open.push_back(p.get());
        fds.push_back({p->client.fd(), POLLIN, 0});
        fds.push_back({p->server.fd(), POLLIN, 0});
      }
    }
    if (::poll(fds.data(), fds.size(), 10) <= 0) continue;
    if (fds[0].revents != 0) {
      net::Socket client = listener_.accept();
      if (client.valid()) {
        auto pair = std::make_unique<Pair>();
        pair->client = std::move(client);
        try {
          pair->server = connect_raw(target_port_);
        } catch (const Error&) {
          pair->open = false;  // nothing there: the client sees its connection closed
        }
        std::lock_guard lock(mu_);
        pairs_.push_back(std::move(pair));
      }
    }
    for (size_t i = 0; i < open.size(); ++i) {
      Pair& p = *open[i];
      bool ok = true;
      if (fds[1 + 2 * i].revents != 0) {
        std::lock_guard lock(mu_);
        ok = pump(p.client, p.server, &p.from_client);
      }
      if (ok && fds[2 + 2 * i].revents != 0) ok = pump(p.server, p.client, nullptr);
      if (!ok) {
        std::lock_guard lock(mu_);
        p.open = false;
        p.client.close();
        p.server.close();
      }
    }
  }
}

// ---- redirect_key ----------------------------------------------------------------

namespace {

class RedirectingStore final : public Store {
 public:
  RedirectingStore(std::shared_ptr<Store> store, std::string suffix, std::string replacement)
      : Store(store->timeout()), store_(std::move(store)), suffix_(std::move(suffix)), replacement_(std::move(replacement)) {}

 protected:
  void do_set(const std::string& key, const std::vector<uint8_t>& value) override { store_->set(key, value); }
  std::vector<uint8_t> do_get(const std::string& key, milliseconds timeout) override {
    std::vector<uint8_t> value = store_->get(key, timeout);  // waits until it is published
    if (!key.ends_with(suffix_)) return value;
    return {replacement_.begin(), replacement_.end()};
  }
  int64_t do_add(const std::string& key, int64_t delta) override { return store_->add(key, delta); }
  std::vector<uint8_t> do_compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                      const std::vector<uint8_t>& desired) override {
    return store_->compare_set(key, expected, desired);
  }
  void do_wait(const std::vector<std::string>& keys, milliseconds timeout) override { store_->wait(keys, timeout); }
  bool do_check(const std::vector<std::string>& keys) override { return store_->check(keys); }
  bool do_delete_key(const std::string& key) override { return store_->delete_key(key); }
  int64_t do_num_keys() override { return store_->num_keys(); }

 private:
  std::shared_ptr<Store> store_;
  std::string suffix_;
  std::string replacement_;
};

}  // namespace

std::shared_ptr<Store> redirect_key(std::shared_ptr<Store> store, std::string key_suffix, std::string replacement) {
  return std::make_shared<RedirectingStore>(std::move(store), std::move(key_suffix), std::move(replacement));
}

// ---- a fake top rank -----------------------------------------------------------------

std::string tcp_channel_key(int instance, const std::string& key) {
  // DataChannel::create: "dc/<backend>/<instance>", then the transport's "transport".
  return "dc/tcp/" + std::to_string(instance) + "/transport/" + key;
}

net::Socket join_mesh_as_top_rank(Store& store, int world_size, int peer, const std::string& token) {
  namespace tcp = detail::tcp;
  const int rank = world_size - 1;
  const auto instance = static_cast<int>(store.add("dc/created/" + std::to_string(rank), 1));
  const net::Nonce random = net::random_nonce();
  const std::vector<uint8_t> proposal(random.begin(), random.begin() + detail::kChannelIdBytes);
  const std::vector<uint8_t> agreed = store.compare_set(tcp_channel_key(instance, "channel_id"), {}, proposal);
  if (agreed.size() != detail::kChannelIdBytes) throw std::runtime_error("the store's channel id has the wrong size");
  detail::Hello self{rank, world_size, {}};
  std::copy(agreed.begin(), agreed.end(), self.channel.begin());

  const std::vector<uint8_t> endpoint = store.get(tcp_channel_key(instance, "addr/" + std::to_string(peer)));
  const std::string text(endpoint.begin(), endpoint.end());
  std::string host;
  uint16_t port = 0;
  if (!tcp::parse_endpoint(text, &host, &port)) throw std::runtime_error("bad endpoint " + text);
  net::Socket s = connect_raw(port);
  const net::Deadline deadline = net::deadline_after(kConnectWithin);
  net::client_handshake(s, net::AuthToken(token, "the test"), deadline, kOp);
  const detail::HelloBytes mine = detail::encode_hello(self);
  s.send_all(mine, deadline, kOp);
  detail::HelloBytes reply{};
  s.recv_exact(reply, deadline, kOp);
  return s;
}

}  // namespace thd::test
