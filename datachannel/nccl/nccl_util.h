// Small helpers the NCCL files share: errors made (not thrown) with the call
// site's op, rank and peer, and the text of a stored error.
#pragma once

#include <fmt/format.h>

#include <exception>
#include <string>
#include <utility>

#include <thd/error.h>

#include "datachannel/check.h"
#include "datachannel/nccl/nccl_error.h"

namespace thd::detail::nccl {

// An error of type E, as THD_THROW_AT would throw it, to store or to fail a request with.
template <typename E, typename... Args>
std::exception_ptr error_at(const CallSite& where, const char* file, int line, fmt::format_string<Args...> format,
                            Args&&... args) {
  return std::make_exception_ptr(
      E(fmt::format(format, std::forward<Args>(args)...), context_at(where.op, where.rank, where.peer, file, line)));
}

// what() of a stored error ("" for none).
inline std::string what_of(const std::exception_ptr& error) {
  if (!error) return "";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an unknown error";
  }
}

}  // namespace thd::detail::nccl
