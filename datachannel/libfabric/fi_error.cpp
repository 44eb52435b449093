#include "datachannel/libfabric/fi_error.h"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>
#include <rdma/fi_errno.h>

namespace thd::detail::libfabric {

std::string fi_error_text(int code) {
  const int positive = code < 0 ? -code : code;
  return fmt::format("{} (fi error {})", fi_strerror(positive), positive);
}

std::string completion_error_text(fid_cq* cq, const fi_cq_err_entry& entry) {
  char buf[256] = {};
  const char* provider_text = fi_cq_strerror(cq, entry.prov_errno, entry.err_data, buf, sizeof buf);
  std::string general = fi_error_text(entry.err);
  if (provider_text == nullptr || *provider_text == '\0') return general;
  return fmt::format("{}: {}", provider_text, general);
}

bool means_peer_lost(int code) {
  switch (code < 0 ? -code : code) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_EHOSTDOWN:
    case FI_ENETDOWN:
    case FI_ESHUTDOWN:
    case EPIPE:  // fi_errno.h leaves FI_EPIPE out; providers pass the errno through
    case FI_ETIMEDOUT:
    case FI_EADDRNOTAVAIL:
    case FI_EIO:
      return true;
    default:
      return false;
  }
}

std::string provider_hint(std::string_view requested) {
  const char* env = std::getenv("FI_PROVIDER");
  std::string asked = !requested.empty() ? fmt::format("provider '{}'", requested)
                      : env != nullptr   ? fmt::format("FI_PROVIDER={}", env)
                                         : std::string("FI_PROVIDER unset (libfabric's own choice)");
  return fmt::format(
      "{}; set FI_PROVIDER=tcp (any host) or FI_PROVIDER=shm (one host), and see "
      "'fi_info -t FI_EP_RDM -c FI_TAGGED' for the providers usable here",
      asked);
}

}  // namespace thd::detail::libfabric
