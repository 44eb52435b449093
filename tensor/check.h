// Raising thd errors from library code. Every throw goes through THD_THROW so the
// error carries the op and the file:line that raised it.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <thd/error.h>
#include <thd/tensor.h>

namespace thd::detail {

inline ErrorContext context_here(std::string op, const char* file, int line) {
  ErrorContext ctx;
  ctx.op = std::move(op);
  ctx.file = file;
  ctx.line = line;
  return ctx;
}

}  // namespace thd::detail

template <>
struct fmt::formatter<thd::DType> : fmt::formatter<std::string_view> {
  auto format(thd::DType d, fmt::format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(thd::dtype_name(d), ctx);
  }
};

// THD_THROW(ShapeError, "add", "shapes {} and {} ...", a, b)
#define THD_THROW(ExcType, op, ...) \
  throw ::thd::ExcType(fmt::format(__VA_ARGS__), ::thd::detail::context_here(op, __FILE__, __LINE__))

#define THD_CHECK(cond, ExcType, op, ...)  \
  do {                                     \
    if (!(cond)) [[unlikely]] {            \
      THD_THROW(ExcType, op, __VA_ARGS__); \
    }                                      \
  } while (0)
