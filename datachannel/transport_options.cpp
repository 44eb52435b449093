#include "datachannel/transport_options.h"

#include <string>

#include "datachannel/check.h"
#include "tensor/env_setting.h"

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

size_t max_unexpected_bytes(std::string_view op, size_t default_bytes, const net::EnvLookup& env) {
  const WholeNumberSetting setting{
      .name = "THD_MAX_UNEXPECTED_BYTES", .min = uint64_t{1} << 20, .unit = "bytes", .min_note = "1 MiB"};
  return parse_whole_number(setting, env("THD_MAX_UNEXPECTED_BYTES"), op).value_or(default_bytes);
}

}  // namespace thd::detail
