// Whole-number settings from environment variables (THD_NUM_THREADS,
// THD_TCP_SPIN_US, ...): one parser, so every setting accepts the same text and
// refuses bad text with the same kind of message.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace thd::detail {

// What a setting accepts, and the words its error message uses for it.
struct WholeNumberSetting {
  std::string_view name = {};  // the variable, e.g. "THD_TCP_SPIN_US"
  uint64_t min = 0;
  uint64_t max = std::numeric_limits<uint64_t>::max();  // the largest: no bound of its own
  std::string_view unit = {};                           // "bytes", "microseconds"; empty for a count
  std::string_view min_note = {};                       // what `min` means, e.g. "never spin"
};

// The value of the variable `name` in this process's environment; nullopt when unset.
std::optional<std::string> env_value(const char* name);

// `value`, the text of setting.name, as a whole number in [min, max]; nullopt when
// the variable is unset or empty (the setting's default applies). Anything else
// (a sign, a space, a unit or other trailing text, a number past 2^64 - 1 or outside
// the range) throws ValueError with context `op`, naming the variable, the text
// and the range accepted:
//   THD_TCP_SPIN_US must be a whole number of microseconds from 0 (never spin) to 1000000, not '5ms'
std::optional<uint64_t> parse_whole_number(const WholeNumberSetting& setting, const std::optional<std::string>& value,
                                           std::string_view op);

// parse_whole_number for text that must hold a number (a part of a longer value):
// the empty text is refused too.
uint64_t parse_whole_number_text(const WholeNumberSetting& setting, std::string_view text, std::string_view op);

// parse_whole_number of setting.name's value in this process's environment (it
// copies the name to look it up: for settings read once, not on a hot path).
std::optional<uint64_t> read_whole_number(const WholeNumberSetting& setting, std::string_view op);

}  // namespace thd::detail
