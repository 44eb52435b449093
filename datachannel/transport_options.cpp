#include "datachannel/transport_options.h"

#include "datachannel/check.h"

namespace thd::detail {

void check_transport_options(const DataChannelOptions& options, std::string_view op, std::string_view store_use) {
  const std::string where(op);
  THD_CHECK(options.store != nullptr, ValueError, where, "DataChannelOptions::store is required: {}", store_use);
  THD_CHECK(options.world_size >= 1, ValueError, where, "world_size must be at least 1, got {}", options.world_size);
  THD_CHECK(options.rank >= 0 && options.rank < options.world_size, ValueError, where,
            "rank {} is out of range for a world of {} (ranks are 0..{})", options.rank, options.world_size,
            options.world_size - 1);
  THD_CHECK(options.timeout.count() > 0, ValueError, where, "timeout must be positive, got {} ms",
            options.timeout.count());
}

}  // namespace thd::detail
