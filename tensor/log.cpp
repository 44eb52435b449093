#include "tensor/log.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace thd::detail {
namespace {

LogLevel parse_level(const char* s) {
  if (s == nullptr) return LogLevel::Error;
  std::string v(s);
  if (v == "debug") return LogLevel::Debug;
  if (v == "info") return LogLevel::Info;
  if (v == "warn" || v == "warning") return LogLevel::Warn;
  if (v == "error") return LogLevel::Error;
  if (v == "off" || v == "none") return LogLevel::Off;
  return LogLevel::Error;
}

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warn: return "warn";
    case LogLevel::Error: return "error";
    case LogLevel::Off: return "off";
  }
  return "?";
}

}  // namespace

LogLevel log_level() {
  static const LogLevel level = parse_level(std::getenv("THD_LOG_LEVEL"));
  return level;
}

void log_write(LogLevel level, std::string_view message) {
  // One write per line so lines from several threads and processes do not interleave.
  static std::mutex mu;
  std::string line = fmt::format("[thd {} pid {}] {}\n", level_name(level), getpid(), message);
  std::lock_guard lock(mu);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace thd::detail
