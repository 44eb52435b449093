#include "tensor/env_setting.h"

#include <charconv>
#include <cstdlib>

#include "tensor/check.h"

namespace thd::detail {

namespace {

// The range in the words of the message: " from 0 (never spin) to 1000000",
// ", at least 1048576 (1 MiB)", or nothing for any whole number.
std::string accepted_range(const WholeNumberSetting& s) {
  const std::string min = s.min_note.empty() ? fmt::format("{}", s.min) : fmt::format("{} ({})", s.min, s.min_note);
  if (s.max != std::numeric_limits<uint64_t>::max()) return fmt::format(" from {} to {}", min, s.max);
  if (s.min != 0 || !s.min_note.empty()) return fmt::format(", at least {}", min);
  return {};
}

}  // namespace

uint64_t parse_whole_number_text(const WholeNumberSetting& setting, std::string_view text, std::string_view op) {
  uint64_t n = 0;
  // from_chars into an unsigned type takes decimal digits only: no sign, no space.
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (!text.empty() && ec == std::errc() && end == text.data() + text.size() && n >= setting.min &&
      n <= setting.max) {
    return n;
  }
  const std::string unit = setting.unit.empty() ? std::string() : fmt::format(" of {}", setting.unit);
  // Only a number past 2^64 - 1 can be too large for a setting without a bound of its own.
  const bool unbounded = setting.max == std::numeric_limits<uint64_t>::max();
  const std::string too_large = ec == std::errc::result_out_of_range && unbounded
                                    ? fmt::format(" (the largest is {})", setting.max)
                                    : std::string();
  THD_THROW(ValueError, std::string(op), "{} must be a whole number{}{}, not '{}'{}", setting.name, unit,
            accepted_range(setting), text, too_large);
}

std::optional<uint64_t> parse_whole_number(const WholeNumberSetting& setting, const std::optional<std::string>& value,
                                           std::string_view op) {
  if (!value || value->empty()) return std::nullopt;
  return parse_whole_number_text(setting, *value, op);
}

std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::optional<uint64_t> read_whole_number(const WholeNumberSetting& setting, std::string_view op) {
  return parse_whole_number(setting, env_value(std::string(setting.name).c_str()), op);
}

}  // namespace thd::detail
