// THD_THROW for distributed errors: the same as tensor/check.h, plus the rank and
// the peer rank the error concerns (-1 where not known), which thd::Error prints as
// "[rank 2, peer 0]".
#pragma once

#include "tensor/check.h"

namespace thd::detail {

inline ErrorContext context_at(std::string op, int rank, int peer, const char* file, int line) {
  ErrorContext ctx = context_here(std::move(op), file, line);
  ctx.rank = rank;
  ctx.peer = peer;
  return ctx;
}

}  // namespace thd::detail

// THD_THROW_AT(TimeoutError, "rendezvous", rank, /*peer=*/-1, "ranks {} never arrived", missing)
#define THD_THROW_AT(ExcType, op, rank, peer, ...)         \
  throw ::thd::ExcType(fmt::format(__VA_ARGS__),           \
                       ::thd::detail::context_at(op, rank, peer, __FILE__, __LINE__))
