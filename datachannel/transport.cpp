#include "datachannel/transport.h"

#include <atomic>

namespace thd::detail {

namespace {
std::atomic<int> g_live_transports{0};
}  // namespace

Transport::Transport(int rank, int size) : rank_(rank), size_(size) {
  g_live_transports.fetch_add(1, std::memory_order_relaxed);
}

Transport::~Transport() { g_live_transports.fetch_sub(1, std::memory_order_relaxed); }

int Transport::live_count() noexcept { return g_live_transports.load(std::memory_order_relaxed); }

bool Transport::wait(RequestState& request, net::Deadline until) { return request.block_until(until); }

std::shared_ptr<RequestState> Transport::send_blocking(std::span<const uint8_t> data, int dst,
                                                       const Envelope& envelope, const RequestMaker& make_request) {
  std::shared_ptr<RequestState> request = make_request();
  post_send(data, dst, envelope, request);
  return request;
}

}  // namespace thd::detail
