#include "datachannel/libfabric/memory_region.h"

#include <rdma/fi_endpoint.h>

namespace thd::detail::libfabric {

int MemoryRegion::register_buffer(fid_domain* domain, fid_ep* ep, const RegistrationPolicy& policy, const void* buf,
                                  size_t len, uint64_t access, uint64_t key) {
  if (!policy.enabled || len == 0) return 0;
  const uint64_t requested_key = policy.provider_keys ? 0 : key;
  int rc = fi_mr_reg(domain, buf, len, access, 0, requested_key, 0, mr_.out(), nullptr);
  if (rc != 0) {
    mr_.reset();
    return rc;
  }
  if (policy.bind_to_endpoint) {
    rc = fi_mr_bind(mr_.get(), &ep->fid, 0);
    if (rc == 0) rc = fi_mr_enable(mr_.get());
    if (rc != 0) mr_.reset();
  }
  return rc;
}

}  // namespace thd::detail::libfabric
