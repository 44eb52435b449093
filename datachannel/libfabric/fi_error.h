// libfabric's error codes and texts in the words thd's errors use.
#pragma once

#include <string>
#include <string_view>

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

namespace thd::detail::libfabric {

// The name of this backend in every error it raises.
inline constexpr const char* kOp = "libfabric backend";

// "Connection refused (FI_ECONNREFUSED 111)": fi_strerror and the code, for an fi_*
// return value (negative) or a completion's err field (positive).
std::string fi_error_text(int code);

// What the provider says about a failed completion (fi_cq_strerror), followed by
// fi_error_text of its code.
std::string completion_error_text(fid_cq* cq, const fi_cq_err_entry& entry);

// True when the error means the peer, or the path to it, is gone (refused, reset,
// unreachable, shut down), so every op with that peer is bound to fail.
bool means_peer_lost(int code);

// What a set-up failure should tell the user to try: the provider asked for
// (option or FI_PROVIDER) and how to pick one that works here.
std::string provider_hint(std::string_view requested);

}  // namespace thd::detail::libfabric
