#include "datachannel/nccl/nccl_backend.h"

#include "datachannel/group_state.h"
#include "datachannel/registry.h"

namespace thd::detail::nccl {

namespace {

// Host messages go to the tcp transport inside; the NCCL collectives live beside it.
class NcclTransport final : public Transport {
 public:
  explicit NcclTransport(std::shared_ptr<Transport> host)
      : Transport(host->rank(), host->size()), host_(std::move(host)), collectives_(rank(), size()) {}

  std::string_view name() const noexcept override { return "nccl"; }
  void post_send(std::span<const uint8_t> data, int dst, const Envelope& envelope,
                 const std::shared_ptr<RequestState>& request) override {
    host_->post_send(data, dst, envelope, request);
  }
  void post_recv(std::span<uint8_t> data, int src, const Envelope& envelope,
                 const std::shared_ptr<RequestState>& request) override {
    host_->post_recv(data, src, envelope, request);
  }
  void cancel(const std::shared_ptr<RequestState>& request, std::exception_ptr why) override {
    host_->cancel(request, std::move(why));
  }
  bool wait(RequestState& request, net::Deadline until) override { return host_->wait(request, until); }
  std::exception_ptr peer_error(int world_rank) const override { return host_->peer_error(world_rank); }
  bool peer_departed(int world_rank) const override { return host_->peer_departed(world_rank); }
  DeviceCollectives* device_collectives() noexcept override { return &collectives_; }

  NcclCollectives& collectives() noexcept { return collectives_; }

 private:
  std::shared_ptr<Transport> host_;
  // Declared after host_: closed first, while the host transport its waits consult is still up.
  NcclCollectives collectives_;
};

}  // namespace

std::shared_ptr<Transport> make_transport(const DataChannelOptions& options) {
  // The tcp backend through the registry, as any program names it: the backends
  // stay apart, and the host transport is whatever "tcp" is in this build.
  return std::make_shared<NcclTransport>(find_backend("tcp").make_transport(options));
}

NcclCollectives* collectives_of(const GroupState& g) {
  auto* transport = dynamic_cast<NcclTransport*>(g.transport.get());
  return transport == nullptr ? nullptr : &transport->collectives();
}

std::unique_ptr<NcclCollectives> make_collectives(DataChannel& channel) {
  const Transport& transport = *detail::state_of(channel).transport;
  return std::make_unique<NcclCollectives>(transport.rank(), transport.size());
}

}  // namespace thd::detail::nccl
