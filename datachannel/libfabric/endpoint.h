// One rank's libfabric objects: the provider chosen by fi_getinfo and the fabric,
// domain, completion queue, address vector and reliable-datagram endpoint opened on
// it, closed in reverse order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include "datachannel/libfabric/fi_handle.h"

namespace thd::detail::libfabric {

struct EndpointSettings {
  int rank = -1;
  int world_size = -1;
  // The provider to use ("tcp", "shm", "tcp;ofi_rxm"); empty: libfabric's first
  // choice among those FI_PROVIDER allows.
  std::string provider;
  // For providers addressed by IP (tcp, sockets): the interface to bind, by
  // address or name. Empty or a wildcard ("0.0.0.0", "::"): the provider's choice.
  std::string bind_host;
};

class Endpoint {
 public:
  // fi_getinfo, then every object, then fi_enable. ConnectionError carrying
  // libfabric's text and a FI_PROVIDER hint when no provider fits or one fails.
  // An endpoint refused for a taken port (fi_endpoint or fi_enable failing with
  // EADDRINUSE or EADDRNOTAVAIL) is made again from fi_getinfo on (kEnableAttempts
  // in all): the tcp provider picks its listening port itself, and on a busy host
  // another process may take it first.
  static Endpoint open(const EndpointSettings& settings);
  static constexpr int kEnableAttempts = 5;

  Endpoint(Endpoint&&) noexcept = default;
  Endpoint& operator=(Endpoint&&) noexcept = default;
  ~Endpoint() = default;

  fid_ep* ep() const noexcept { return ep_.get(); }
  fid_cq* cq() const noexcept { return cq_.get(); }
  fid_av* av() const noexcept { return av_.get(); }
  fid_domain* domain() const noexcept { return domain_.get(); }
  const fi_info& info() const noexcept { return *info_; }

  // "tcp;ofi_rxm", "shm".
  std::string_view provider() const noexcept { return info_->fabric_attr->prov_name; }
  // Receives can name their source (FI_DIRECTED_RECV).
  bool directed_recv() const noexcept { return (info_->caps & FI_DIRECTED_RECV) != 0; }
  // Buffers must be registered before an op uses them (FI_MR_LOCAL).
  bool needs_local_mr() const noexcept { return (info_->domain_attr->mr_mode & FI_MR_LOCAL) != 0; }
  // The completion queue's file descriptor (FI_WAIT_FD), or -1 when the provider
  // has no wait object and the pipe must poll.
  int wait_fd() const noexcept { return wait_fd_; }

  // This endpoint's address (fi_getname), for its peers' address vectors.
  std::vector<uint8_t> name() const;
  // fi_trywait on the completion queue: 0 when sleeping on wait_fd() is safe,
  // -FI_EAGAIN when there may be completions to read first. Needs wait_fd() >= 0.
  int trywait() noexcept;

  // Closes the endpoint alone: after this the provider touches no buffer or
  // context of any op, so their memory may go. The other objects close with this.
  void close_endpoint() noexcept { ep_.reset(); }

 private:
  Endpoint() = default;
  // open()'s steps: throws as open() does, but returns the result of the two
  // that a taken port fails (fi_endpoint, fi_enable), naming which in *call.
  int set_up(const EndpointSettings& settings, const char** call);

  // Members close in reverse: endpoint, then what it is bound to.
  InfoPtr info_;
  Fid<fid_fabric> fabric_;
  Fid<fid_domain> domain_;
  Fid<fid_cq> cq_;
  Fid<fid_av> av_;
  Fid<fid_ep> ep_;
  int wait_fd_ = -1;
};

}  // namespace thd::detail::libfabric
