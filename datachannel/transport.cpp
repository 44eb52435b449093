#include "datachannel/transport.h"

#include <atomic>

#include "datachannel/recycling_allocator.h"

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

int Transport::recv_blocking(std::span<uint8_t> data, int src, const Envelope& envelope, const RequestSpec& spec) {
  auto request = std::allocate_shared<RequestState>(RecyclingAllocator<RequestState>(), spec, this);
  if (spec.keep != nullptr) request->kept_storage = spec.keep->storage();
  post_recv(data, src, envelope, request);
  // The finished request is dropped at this thread's next blocking receive, not on
  // the way out: a caller that answers the message at once (a ping-pong) sends
  // before the request is torn down. Declared after the first request is made, so
  // that it is destroyed before the allocator's per-thread spares at thread exit.
  thread_local std::shared_ptr<RequestState> finished;
  finished = nullptr;
  try {
    Request(request).wait();
  } catch (...) {
    // The host's interrupt check ends a wait with its own exception, the receive
    // still posted: withdrawn, it takes no later message into the caller's memory.
    if (!request->finished()) cancel(request, std::current_exception());
    throw;
  }
  const int source = request->source;
  // One that keeps a tensor goes now: the tensor's memory is not held past the call.
  if (spec.keep == nullptr) finished = std::move(request);
  return source;
}

}  // namespace thd::detail
