// The DataChannel's way to the state behind its public handles, which keep it
// private (include/thd/datachannel.h): the datachannel's own code and its tests
// reach it here; the layers above go through the channel's calls
// (datachannel/runtime_queries.h for what the runtime asks beyond them).
#pragma once

#include <memory>

#include <thd/datachannel.h>

namespace thd::detail {

struct ChannelAccess {
  static GroupState& state(DataChannel& channel) noexcept { return channel.state(); }
  static const std::shared_ptr<RequestState>& state(const Request& request) noexcept { return request.state_; }
};

inline GroupState& state_of(DataChannel& channel) noexcept { return ChannelAccess::state(channel); }
inline const std::shared_ptr<RequestState>& state_of(const Request& request) noexcept {
  return ChannelAccess::state(request);
}

}  // namespace thd::detail
