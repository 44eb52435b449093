#include "datachannel/libfabric/endpoint.h"

#include <cstring>
#include <new>

#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>

#include "datachannel/check.h"
#include "datachannel/libfabric/fi_error.h"
#include "tensor/log.h"

namespace thd::detail::libfabric {

namespace {

constexpr uint32_t kApiVersion = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);

// What the pipe asks of a provider: reliable datagrams with tag matching, messages
// of one sender matched in send order (FI_ORDER_SAS), one thread in the domain at
// a time (the pipe's caller serializes), and memory registration wherever the
// provider wants it. FI_CONTEXT/FI_CONTEXT2: every op carries an fi_context2.
InfoPtr make_hints(const std::string& provider, uint64_t caps) {
  InfoPtr hints(fi_allocinfo());
  if (!hints) throw std::bad_alloc();
  hints->caps = caps;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  if (!provider.empty()) {
    // fi_freeinfo frees it with free().
    hints->fabric_attr->prov_name = strdup(provider.c_str());
    if (hints->fabric_attr->prov_name == nullptr) throw std::bad_alloc();
  }
  return hints;
}

int getinfo(const std::string& provider, uint64_t caps, const char* node, InfoPtr* out) {
  InfoPtr hints = make_hints(provider, caps);
  fi_info* found = nullptr;
  const int rc = fi_getinfo(kApiVersion, node, nullptr, node != nullptr ? FI_SOURCE : 0, hints.get(), &found);
  out->reset(found);
  return rc;
}

bool addressed_by_ip(uint32_t addr_format) {
  return addr_format == FI_SOCKADDR || addr_format == FI_SOCKADDR_IN || addr_format == FI_SOCKADDR_IN6;
}

bool names_one_interface(const std::string& host) {
  return !host.empty() && host != "0.0.0.0" && host != "::" && host != "*";
}

// The first provider that fits, on bind_host's interface when it is addressed by IP.
InfoPtr choose_provider(const EndpointSettings& s) {
  // Directed receives let the provider match the source itself; without them the
  // sender's rank in the tag does it (tag_layout.h), so either will do.
  uint64_t caps = FI_TAGGED | FI_DIRECTED_RECV;
  InfoPtr found;
  int rc = getinfo(s.provider, caps, nullptr, &found);
  if (rc == -FI_ENODATA) {
    caps = FI_TAGGED;
    rc = getinfo(s.provider, caps, nullptr, &found);
  }
  if (rc != 0 || !found) {
    THD_THROW_AT(ConnectionError, kOp, s.rank, -1,
                 "no libfabric provider offers reliable tagged messages in send order (FI_EP_RDM, FI_TAGGED, "
                 "FI_ORDER_SAS): fi_getinfo: {}; {}",
                 fi_error_text(rc), provider_hint(s.provider));
  }
  if (!addressed_by_ip(found->addr_format) || !names_one_interface(s.bind_host)) return found;

  // Again with the interface: the same provider, bound to bind_host (FI_SOURCE).
  const std::string chosen = found->fabric_attr->prov_name;
  InfoPtr bound;
  rc = getinfo(chosen, caps, s.bind_host.c_str(), &bound);
  if (rc != 0 || !bound) {
    THD_THROW_AT(ConnectionError, kOp, s.rank, -1,
                 "libfabric provider '{}' cannot use bind_host '{}': fi_getinfo: {}; give bind_host an address of "
                 "this host, or {}",
                 chosen, s.bind_host, fi_error_text(rc), provider_hint(s.provider));
  }
  return bound;
}

void check_set_up(int rc, const char* call, const EndpointSettings& s, std::string_view provider) {
  if (rc == 0) return;
  THD_THROW_AT(ConnectionError, kOp, s.rank, -1, "{} failed for libfabric provider '{}': {}; {}", call, provider,
               fi_error_text(rc), provider_hint(s.provider));
}

}  // namespace

Endpoint Endpoint::open(const EndpointSettings& s) {
  for (int attempt = 1;; ++attempt) {
    Endpoint e;
    const char* call = nullptr;
    const int rc = e.set_up(s, &call);
    if (rc == 0) return e;
    // The port the provider picked is taken (EADDRINUSE), or every port of its
    // range is (EADDRNOTAVAIL): a fresh endpoint picks again.
    const bool port_taken = rc == -FI_EADDRINUSE || rc == -FI_EADDRNOTAVAIL;
    if (!port_taken || attempt == kEnableAttempts) check_set_up(rc, call, s, e.provider());
    THD_LOG_DEBUG("libfabric (rank {}): {}: {}; a fresh endpoint, attempt {} of {}", s.rank, call,
                  fi_error_text(rc), attempt + 1, kEnableAttempts);
  }
}

int Endpoint::set_up(const EndpointSettings& s, const char** call) {
  Endpoint& e = *this;
  e.info_ = choose_provider(s);
  const std::string provider(e.provider());
  const fi_info& info = *e.info_;
  if ((info.tx_attr->msg_order & FI_ORDER_SAS) == 0 || (info.rx_attr->msg_order & FI_ORDER_SAS) == 0) {
    THD_THROW_AT(ConnectionError, kOp, s.rank, -1,
                 "libfabric provider '{}' does not keep one sender's messages in order (FI_ORDER_SAS); {}", provider,
                 provider_hint(s.provider));
  }

  check_set_up(fi_fabric(info.fabric_attr, e.fabric_.out(), nullptr), "fi_fabric", s, provider);
  check_set_up(fi_domain(e.fabric_.get(), e.info_.get(), e.domain_.out(), nullptr), "fi_domain", s, provider);

  // A completion queue with a file descriptor to sleep on where the provider has
  // one (tcp); shm has none (FI_ENOSYS), so the pipe polls with short naps there.
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_FD;
  if (fi_cq_open(e.domain_.get(), &cq_attr, e.cq_.out(), nullptr) == 0) {
    int fd = -1;
    if (fi_control(e.cq_.as_fid(), FI_GETWAIT, &fd) == 0 && fd >= 0) {
      e.wait_fd_ = fd;
    } else {
      e.cq_.reset();
    }
  }
  if (!e.cq_) {
    cq_attr.wait_obj = FI_WAIT_NONE;
    check_set_up(fi_cq_open(e.domain_.get(), &cq_attr, e.cq_.out(), nullptr), "fi_cq_open", s, provider);
  }

  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = static_cast<size_t>(s.world_size);
  check_set_up(fi_av_open(e.domain_.get(), &av_attr, e.av_.out(), nullptr), "fi_av_open", s, provider);

  *call = "fi_endpoint";
  if (const int rc = fi_endpoint(e.domain_.get(), e.info_.get(), e.ep_.out(), nullptr); rc != 0) return rc;
  check_set_up(fi_ep_bind(e.ep_.get(), e.av_.as_fid(), 0), "fi_ep_bind (address vector)", s, provider);
  check_set_up(fi_ep_bind(e.ep_.get(), e.cq_.as_fid(), FI_TRANSMIT | FI_RECV), "fi_ep_bind (completion queue)", s,
               provider);
  *call = "fi_enable";
  return fi_enable(e.ep_.get());
}

std::vector<uint8_t> Endpoint::name() const {
  std::vector<uint8_t> name(64);
  size_t len = name.size();
  int rc = fi_getname(ep_.as_fid(), name.data(), &len);
  if (rc == -FI_ETOOSMALL) {
    name.resize(len);
    rc = fi_getname(ep_.as_fid(), name.data(), &len);
  }
  if (rc != 0) {
    THD_THROW(ConnectionError, kOp, "fi_getname failed for libfabric provider '{}': {}", provider(), fi_error_text(rc));
  }
  name.resize(len);
  return name;
}

int Endpoint::trywait() noexcept {
  fid* fids[] = {cq_.as_fid()};
  return fi_trywait(fabric_.get(), fids, 1);
}

}  // namespace thd::detail::libfabric
