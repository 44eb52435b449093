// THD_THROW for distributed errors: the same as tensor/check.h, plus the rank and
// the peer rank the error concerns (-1 where not known), which thd::Error prints as
// "[rank 2, peer 0]".
#pragma once

#include <exception>
#include <string>
#include <utility>

#include "tensor/check.h"

namespace thd::detail {

inline ErrorContext context_at(std::string op, int rank, int peer, const char* file, int line) {
  ErrorContext ctx = context_here(std::move(op), file, line);
  ctx.rank = rank;
  ctx.peer = peer;
  return ctx;
}

// The error THD_THROW_AT would throw, for failing a request with rather than
// throwing.
template <typename E, typename... Args>
std::exception_ptr error_at(const std::string& op, int rank, int peer, fmt::format_string<Args...> f,
                            Args&&... args) {
  return std::make_exception_ptr(
      E(fmt::format(f, std::forward<Args>(args)...), context_at(op, rank, peer, __FILE__, __LINE__)));
}

}  // namespace thd::detail

// THD_THROW_AT(TimeoutError, "rendezvous", rank, /*peer=*/-1, "ranks {} never arrived", missing)
#define THD_THROW_AT(ExcType, op, rank, peer, ...)         \
  throw ::thd::ExcType(fmt::format(__VA_ARGS__),           \
                       ::thd::detail::context_at(op, rank, peer, __FILE__, __LINE__))
