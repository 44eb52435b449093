// Diagnostics to stderr, silent by default: THD_LOG_LEVEL=debug|info|warn|error
// chooses what is printed (default: error). Used for events a user may want to
// know about but that are not errors of the call at hand, e.g. a refused
// unauthenticated connection.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace thd::detail {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

// The level from THD_LOG_LEVEL, read once.
LogLevel log_level();
void log_write(LogLevel level, std::string_view message);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level < log_level()) return;
  log_write(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace thd::detail

#define THD_LOG_DEBUG(...) ::thd::detail::log(::thd::detail::LogLevel::Debug, __VA_ARGS__)
#define THD_LOG_INFO(...) ::thd::detail::log(::thd::detail::LogLevel::Info, __VA_ARGS__)
#define THD_LOG_WARN(...) ::thd::detail::log(::thd::detail::LogLevel::Warn, __VA_ARGS__)
#define THD_LOG_ERROR(...) ::thd::detail::log(::thd::detail::LogLevel::Error, __VA_ARGS__)
