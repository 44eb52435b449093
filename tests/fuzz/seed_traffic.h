// What the seed generator records real traffic with (seed_corpus.cpp):
// - RecordingTransport: a rank's transport of an in-process world (the unit tests'
//   InprocWorld) that keeps a copy of every message the rank sends;
// - TcpRelay: a loopback proxy between a client and a server that keeps the bytes
//   of each direction.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <thd/datachannel.h>

#include "datachannel/inproc_transport.h"
#include "datachannel/net/socket.h"

namespace thd::fuzz {

struct SentMessage {
  int src = -1;
  int dst = -1;
  detail::Envelope envelope;
  std::vector<uint8_t> bytes;
};

// A log every rank of one world appends to, in the order the sends were posted.
class TrafficLog {
 public:
  void add(SentMessage m);
  std::vector<SentMessage> take();

 private:
  std::mutex mu_;
  std::vector<SentMessage> messages_;
};

class RecordingTransport final : public detail::Transport {
 public:
  RecordingTransport(std::shared_ptr<test::InprocWorld> world, int rank, std::shared_ptr<TrafficLog> log)
      : Transport(rank, world->size()), inner_(world, rank), log_(std::move(log)) {}

  std::string_view name() const noexcept override { return "recorded"; }
  void post_send(std::span<const uint8_t> data, int dst, const detail::Envelope& envelope,
                 const std::shared_ptr<detail::RequestState>& request) override;
  void post_recv(std::span<uint8_t> data, int src, const detail::Envelope& envelope,
                 const std::shared_ptr<detail::RequestState>& request) override {
    inner_.post_recv(data, src, envelope, request);
  }
  void cancel(const std::shared_ptr<detail::RequestState>& request, std::exception_ptr why) override {
    inner_.cancel(request, std::move(why));
  }
  std::exception_ptr peer_error(int world_rank) const override { return inner_.peer_error(world_rank); }

 private:
  test::InprocTransport inner_;
  std::shared_ptr<TrafficLog> log_;
};

// The channels of a world of `size` ranks over RecordingTransports and one store.
std::vector<std::shared_ptr<DataChannel>> recorded_world(int size, const std::shared_ptr<TrafficLog>& log,
                                                         std::chrono::milliseconds timeout);

// A loopback proxy for one connection: clients connect to port(); the relay
// connects to the server and copies both ways, keeping what passed, until both
// sides have closed (or stop()).
class TcpRelay {
 public:
  TcpRelay(std::string server_host, uint16_t server_port);
  ~TcpRelay();
  uint16_t port() const { return port_; }
  // Waits for the connection to end (at most `within`); then the bytes are final.
  void finish(std::chrono::milliseconds within);
  const std::vector<uint8_t>& to_server() const { return to_server_; }
  const std::vector<uint8_t>& to_client() const { return to_client_; }

 private:
  void run();

  net::Socket listener_;
  std::string server_host_;
  uint16_t server_port_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<uint8_t> to_server_;
  std::vector<uint8_t> to_client_;
  std::thread thread_;
};

}  // namespace thd::fuzz
