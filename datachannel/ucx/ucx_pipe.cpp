#include "datachannel/ucx/ucx_pipe.h"

#include <algorithm>
#include <chrono>

#include "datachannel/check.h"
#include "datachannel/pipe/address_book.h"
#include "datachannel/transport_options.h"
#include "datachannel/ucx/ucx_handles.h"
#include "datachannel/ucx/ucx_message_pipe.h"

namespace thd::detail::ucx {

namespace {

constexpr const char* kOp = "ucx backend";

std::chrono::milliseconds left_until(net::Deadline until) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - net::Clock::now());
  return std::max(std::chrono::milliseconds{1}, left);  // the store wants a positive timeout
}

void check_options(const DataChannelOptions& options, const PipeSettings& settings) {
  check_transport_options(options, kOp, "the ranks exchange their UCX worker addresses through it");
  THD_CHECK(settings.close_timeout.count() >= 0, ValueError, kOp, "close_timeout must not be negative, got {} ms",
            settings.close_timeout.count());
}

}  // namespace

std::unique_ptr<pipe::MessagePipe> make_pipe(const DataChannelOptions& options) {
  return make_pipe(options, PipeSettings{});
}

std::unique_ptr<pipe::MessagePipe> make_pipe(const DataChannelOptions& options, const PipeSettings& settings) {
  check_options(options, settings);
  const net::Deadline until = net::deadline_after(options.timeout);
  const int rank = options.rank;

  UniqueContext context;
  {
    UniqueConfig config = read_config(settings, rank);
    const ContextShape shape{sizeof(RequestSlot), &RequestSlot::init, options.world_size};
    context = create_context(config.get(), shape, settings, rank);
  }
  UniqueWorker worker = create_worker(context.get(), rank);
  const std::vector<uint8_t> address = worker_address(worker.get(), rank);
  auto pipe =
      std::make_unique<UcxMessagePipe>(rank, options.world_size, std::move(context), std::move(worker), settings);
  const auto addresses = pipe::exchange_addresses(*options.store, "ucx", rank, options.world_size, address, left_until(until));
  pipe->connect(addresses);
  pipe->greet_peers(until);
  return pipe;
}

}  // namespace thd::detail::ucx
