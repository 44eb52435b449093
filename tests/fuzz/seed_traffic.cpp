#include "seed_traffic.h"

#include <poll.h>
#include <sys/socket.h>

#include <thd/store.h>

#include "datachannel/group_state.h"

namespace thd::fuzz {

void TrafficLog::add(SentMessage m) {
  std::lock_guard lock(mu_);
  messages_.push_back(std::move(m));
}

std::vector<SentMessage> TrafficLog::take() {
  std::lock_guard lock(mu_);
  return std::exchange(messages_, {});
}

void RecordingTransport::post_send(std::span<const uint8_t> data, int dst, const detail::Envelope& envelope,
                                   const std::shared_ptr<detail::RequestState>& request) {
  log_->add({rank(), dst, envelope, std::vector<uint8_t>(data.begin(), data.end())});
  inner_.post_send(data, dst, envelope, request);
}

std::vector<std::shared_ptr<DataChannel>> recorded_world(int size, const std::shared_ptr<TrafficLog>& log,
                                                         std::chrono::milliseconds timeout) {
  auto world = std::make_shared<test::InprocWorld>(size);
  auto store = std::make_shared<HashStore>(timeout);
  auto ranks = std::make_shared<std::vector<int>>();
  for (int r = 0; r < size; ++r) ranks->push_back(r);
  std::vector<std::shared_ptr<DataChannel>> out;
  for (int r = 0; r < size; ++r) {
    auto g = std::make_unique<detail::GroupState>();
    g->backend = "recorded";
    g->transport = std::make_shared<RecordingTransport>(world, r, log);
    g->store = store;
    g->world_ranks = ranks;
    g->rank = r;
    g->timeout = timeout;
    out.push_back(std::make_shared<DataChannel>(std::move(g)));
  }
  return out;
}

TcpRelay::TcpRelay(std::string server_host, uint16_t server_port)
    : listener_(net::Socket::listen("127.0.0.1", 0, "relay")),
      server_host_(std::move(server_host)),
      server_port_(server_port),
      port_(listener_.local_port()),
      thread_([this] { run(); }) {}

TcpRelay::~TcpRelay() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void TcpRelay::finish(std::chrono::milliseconds within) {
  const auto deadline = net::deadline_after(within);
  while (thread_.joinable() && net::Clock::now() < deadline && !stop_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void TcpRelay::run() {
  net::Socket client;
  while (!stop_.load() && !client.valid()) {
    client = listener_.accept();
    if (!client.valid()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!client.valid()) return;
  net::Socket server = net::Socket::connect(server_host_, server_port_, net::deadline_after(std::chrono::seconds(5)),
                                            "relay");
  struct Direction {
    net::Socket* from;
    net::Socket* to;
    std::vector<uint8_t>* log;
    bool open = true;
  };
  Direction dirs[2] = {{&client, &server, &to_server_}, {&server, &client, &to_client_}};
  uint8_t buf[65536];
  while (!stop_.load() && (dirs[0].open || dirs[1].open)) {
    pollfd p[2] = {{client.fd(), static_cast<short>(dirs[0].open ? POLLIN : 0), 0},
                   {server.fd(), static_cast<short>(dirs[1].open ? POLLIN : 0), 0}};
    if (::poll(p, 2, 10) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      Direction& d = dirs[i];
      if (!d.open || p[i].revents == 0) continue;
      net::IoResult r = d.from->recv_some(buf);
      if (r.status == net::IoResult::Status::WouldBlock) continue;
      if (r.status != net::IoResult::Status::Ok) {
        d.open = false;
        ::shutdown(d.to->fd(), SHUT_WR);
        continue;
      }
      d.log->insert(d.log->end(), buf, buf + r.bytes);
      d.to->send_all({buf, r.bytes}, net::deadline_after(std::chrono::seconds(5)), "relay");
    }
  }
  stop_.store(true);
}

}  // namespace thd::fuzz
