// Registration of an op's buffer with the domain, for providers that need it
// (FI_MR_LOCAL): one registration per op, made when the op starts and closed when
// it completes. Small-message traffic (PipeTransport's control messages) goes
// unregistered on the providers tested here (tcp, shm), which do not ask for it.
#pragma once

#include <cstddef>
#include <cstdint>

#include <rdma/fi_domain.h>

#include "datachannel/libfabric/fi_handle.h"

namespace thd::detail::libfabric {

// How a domain wants its registrations made.
struct RegistrationPolicy {
  // Register at all: the provider needs FI_MR_LOCAL, or a test asked for it.
  bool enabled = false;
  // The provider picks keys (FI_MR_PROV_KEY); otherwise the pipe numbers them.
  bool provider_keys = false;
  // Registrations are bound to the endpoint and enabled (FI_MR_ENDPOINT).
  bool bind_to_endpoint = false;
};

class MemoryRegion {
 public:
  MemoryRegion() = default;

  // Registers [buf, buf + len) for `access` (FI_SEND or FI_RECV). 0, or the
  // negative fi error; an empty buffer is never registered (desc() stays null).
  int register_buffer(fid_domain* domain, fid_ep* ep, const RegistrationPolicy& policy, const void* buf, size_t len,
                      uint64_t access, uint64_t key);

  // The descriptor an fi_tsend/fi_trecv takes: null when nothing is registered.
  void* desc() const noexcept { return mr_ ? fi_mr_desc(mr_.get()) : nullptr; }

 private:
  Fid<fid_mr> mr_;
};

}  // namespace thd::detail::libfabric
