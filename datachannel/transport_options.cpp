#include "datachannel/transport_options.h"

#include <charconv>
#include <string>

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

size_t max_unexpected_bytes(std::string_view op, size_t default_bytes, const net::EnvLookup& env) {
  constexpr uint64_t kMin = uint64_t{1} << 20;
  const std::optional<std::string> value = env("THD_MAX_UNEXPECTED_BYTES");
  if (!value || value->empty()) return default_bytes;
  const std::string& s = *value;
  uint64_t bytes = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), bytes);
  THD_CHECK(ec == std::errc() && end == s.data() + s.size() && bytes >= kMin, ValueError, std::string(op),
            "THD_MAX_UNEXPECTED_BYTES must be a whole number of bytes, at least {} (1 MiB), not '{}'", kMin, s);
  return static_cast<size_t>(bytes);
}

}  // namespace thd::detail
