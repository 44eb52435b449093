// A reference for the ucx DataChannel's round trip measured inside the ranks, next
// to it: two ranks' UCP workers and one endpoint each way, driven as ucx_perftest's
// tag_lat drives them (ucp_tag_send_nbx / ucp_tag_recv_nbx on one tag, busy
// ucp_worker_progress, no threads), with the ranks' UCX_* environment.
//
// ucx_perftest runs after the ranks, and this VM changes speed within seconds
// (raw UCX 0.2, 0.4 or 1.3 us a round trip): a figure and a reference taken
// seconds apart often come from different states. This reference is timed in the
// same repetitions as the channel's figure, interleaved (DistTimer), so their ratio
// compares them under the same conditions.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <thd/store.h>

namespace thd::bench::dc {

class RawUcxConnection {
 public:
  // Ranks 0 and 1 each publish their worker's address under `key` in the job's
  // store and connect to the other's; returns once a message went each way.
  // Throws std::runtime_error naming the UCX call and status that failed, or the
  // store's TimeoutError when the other rank does not show up within `timeout`.
  static std::unique_ptr<RawUcxConnection> connect(Store& store, const std::string& key, int rank,
                                                   std::chrono::milliseconds timeout);
  ~RawUcxConnection();
  RawUcxConnection(const RawUcxConnection&) = delete;
  RawUcxConnection& operator=(const RawUcxConnection&) = delete;

  // Return once the message left / arrived whole; busy-poll meanwhile. Throw
  // std::runtime_error on a UCX error or when `timeout` (from the call) passes.
  void send(std::span<const uint8_t> data);
  void recv(std::span<uint8_t> data);

 private:
  struct Handles;
  explicit RawUcxConnection(std::unique_ptr<Handles> handles, std::chrono::milliseconds timeout);
  // Drives the worker until `request` (from a ucp_*_nbx call) is done, then frees it.
  void finish(void* request, const char* what);

  std::unique_ptr<Handles> h_;
  std::chrono::milliseconds timeout_;
};

}  // namespace thd::bench::dc
