// The MessageKind::count of a peer's call known only to be too large for the
// library tag its message came in (pipe/collective_tag.h); describe() names it so.
#pragma once

#include <cstdint>

namespace thd::detail {

inline constexpr uint64_t kUnnamedCount = UINT64_MAX;

}  // namespace thd::detail
