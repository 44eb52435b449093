// Argument checks and request making shared by the DataChannel's point-to-point
// and collective calls. Every check runs before anything is posted, so a bad
// call fails on the rank that made it and nothing reaches the network.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <thd/datachannel.h>

#include "datachannel/group_state.h"
#include "datachannel/request_state.h"

namespace thd::detail {

// The checks run on every message, so their passing case is inline; the errors
// are made out of line.
[[noreturn]] void throw_not_member(const GroupState& g, std::string_view op);
[[noreturn]] void throw_bad_rank(const GroupState& g, int r, std::string_view op, std::string_view what, bool any_ok);
[[noreturn]] void throw_bad_tag(const GroupState& g, int64_t tag, std::string_view op, int64_t max);

// ValueError unless this rank belongs to the group (and it was not shut down).
inline void check_member(const GroupState& g, std::string_view op) {
  if (g.rank >= 0 && !g.shut_down->load(std::memory_order_acquire)) [[likely]] return;
  throw_not_member(g, op);
}
// IndexError unless 0 <= r < size (kAnySource allowed when any_ok); `what` is
// "destination", "source" or "root".
inline void check_rank(const GroupState& g, int r, std::string_view op, std::string_view what, bool any_ok = false) {
  if ((r >= 0 && r < g.size()) || (any_ok && r == kAnySource)) [[likely]] return;
  throw_bad_rank(g, r, op, what, any_ok);
}
// ValueError for an undefined or non-CPU tensor; with must_be_contiguous, also
// for a strided one (outputs are written in place).
void check_tensor(const GroupState& g, const Tensor& t, std::string_view op, std::string_view what,
                  bool must_be_contiguous);
inline void check_tag(const GroupState& g, int64_t tag, std::string_view op, int64_t max) {
  if (tag >= 0 && tag <= max) [[likely]] return;
  throw_bad_tag(g, tag, op, max);
}

std::chrono::milliseconds resolve_timeout(const GroupState& g, std::chrono::milliseconds requested);

// True for a tensor the channel's device collectives take (a CUDA tensor).
inline bool on_device(const Tensor& t) { return t.defined() && t.device().is_cuda(); }
// The collectives for device tensors of the channel `g` belongs to: its backend's
// own, else the build's (made at the first call). NotImplementedError, naming how
// to build them, when there are none.
DeviceCollectives& device_collectives(GroupState& g, std::string_view op);
// Whether `g`'s device collectives can take a collective on CUDA device `device`
// now (DeviceCollectives::usable_on); false when the build has none.
bool device_collectives_usable(GroupState& g, int device);

// A request for an op of this group, due at now + timeout.
std::shared_ptr<RequestState> make_request(const GroupState& g, OpLabel op, std::chrono::milliseconds timeout,
                                           Transport* engine);
// A point-to-point request of this group made from `spec`, keeping its tensor.
std::shared_ptr<RequestState> make_request(const GroupState& g, const RequestSpec& spec, Transport* engine);

}  // namespace thd::detail
