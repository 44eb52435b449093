#include "tools/common/cli.h"

#include <charconv>
#include <cmath>

namespace thd::cli {

std::optional<Builtin> builtin_named(std::string_view name) {
  if (name == "-h" || name == "--help") return Builtin::Help;
  if (name == "-V" || name == "--version") return Builtin::Version;
  return std::nullopt;
}

SplitArgument split_argument(std::string_view arg, bool short_values) {
  if (arg.starts_with("--")) {
    if (size_t eq = arg.find('='); eq != std::string_view::npos) return {arg.substr(0, eq), arg.substr(eq + 1)};
  } else if (short_values && arg.starts_with('-') && arg.size() > 2) {
    return {arg.substr(0, 2), arg.substr(2)};
  }
  return {arg, std::nullopt};
}

ArgumentKind kind_of(std::string_view arg, const ReadRules& rules) {
  if (rules.operands == Operands::Reject) return ArgumentKind::Option;
  if (arg == "--") return ArgumentKind::EndOfOptions;
  if (arg.size() < 2 || arg[0] != '-') return ArgumentKind::Operand;  // "-" alone too
  return ArgumentKind::Option;
}

std::optional<int64_t> parse_integer(std::string_view text, int64_t min, int64_t max) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < min || v > max) {
    return std::nullopt;
  }
  return v;
}

int64_t parse_number(const char* op, std::string_view name, std::string_view value, int64_t min, int64_t max,
                     std::string_view what) {
  auto v = parse_integer(value, min, max);
  THD_CHECK(v.has_value(), ValueError, op, "{} expects {} from {} to {}, got '{}'", name, what, min, max, value);
  return *v;
}

uint16_t parse_port(const char* op, std::string_view name, std::string_view value) {
  return static_cast<uint16_t>(parse_number(op, name, value, 1, 65535, "a TCP port"));
}

std::chrono::milliseconds parse_seconds(const char* op, std::string_view name, std::string_view value,
                                        double max_seconds, std::string_view example) {
  double s = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), s);
  const bool whole = ec == std::errc() && end == value.data() + value.size() && !value.empty();
  THD_CHECK(whole && std::isfinite(s) && s >= 0 && s <= max_seconds, ValueError, op,
            "{} expects seconds from 0 to {}{}, got '{}'", name, max_seconds, example, value);
  return std::chrono::milliseconds(std::llround(s * 1000));
}

std::string parse_host(const char* op, std::string_view name, std::string_view value) {
  THD_CHECK(!value.empty(), ValueError, op, "{} expects a host name or address, got ''", name);
  return std::string(value);
}

HostPort parse_listen_address(const char* op, std::string_view name, std::string_view value) {
  std::string_view host, port;
  if (value.starts_with('[')) {
    const size_t close = value.find(']');
    const bool ok = close != std::string_view::npos && value.substr(close + 1).starts_with(':');
    THD_CHECK(ok, ValueError, op, "{} expects HOST:PORT or [V6]:PORT, got '{}'", name, value);
    host = value.substr(1, close - 1);
    port = value.substr(close + 2);
  } else {
    const size_t colon = value.rfind(':');
    THD_CHECK(colon != std::string_view::npos && value.find(':') == colon, ValueError, op,
              "{} expects HOST:PORT (IPv6 in brackets: [::1]:PORT), got '{}'", name, value);
    host = value.substr(0, colon);
    port = value.substr(colon + 1);
  }
  THD_CHECK(!host.empty(), ValueError, op, "{} expects HOST:PORT, got '{}' with no host", name, value);
  auto v = parse_integer(port, 0, 65535);
  THD_CHECK(v.has_value(), ValueError, op, "{} expects a TCP port from 0 (a free one) to 65535, got '{}'", name,
            port);
  return HostPort{std::string(host), static_cast<uint16_t>(*v)};
}

}  // namespace thd::cli
