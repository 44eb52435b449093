#include "datachannel/libfabric/libfabric_pipe.h"

#include "datachannel/check.h"
#include "datachannel/libfabric/address_exchange.h"
#include "datachannel/transport_options.h"
#include "datachannel/libfabric/endpoint.h"
#include "datachannel/libfabric/fabric_pipe.h"
#include "datachannel/libfabric/fi_error.h"
#include "datachannel/libfabric/in_process_peers.h"
#include "datachannel/libfabric/tag_layout.h"

namespace thd::detail::libfabric {

std::unique_ptr<pipe::MessagePipe> make_pipe(const DataChannelOptions& options) {
  return make_pipe(options, PipeSettings{});
}

std::unique_ptr<pipe::MessagePipe> make_pipe(const DataChannelOptions& options, const PipeSettings& settings) {
  check_transport_options(options, kOp, "the ranks exchange their addresses through it");

  EndpointSettings endpoint_settings;
  endpoint_settings.rank = options.rank;
  endpoint_settings.world_size = options.world_size;
  endpoint_settings.provider = settings.provider;
  endpoint_settings.bind_host = options.bind_host;
  Endpoint endpoint = Endpoint::open(endpoint_settings);

  const int usable_bits = TagLayout::usable_bits(endpoint.info().ep_attr->mem_tag_format);
  const std::optional<TagLayout> tags = TagLayout::make(usable_bits, options.world_size);
  if (!tags) {
    THD_THROW_AT(ConnectionError, kOp, options.rank, -1,
                 "libfabric provider '{}' matches on {} tag bits, too few for a world of {} ranks and {} bits of "
                 "tag; {}",
                 endpoint.provider(), usable_bits, options.world_size, TagLayout::kMinTagBits,
                 provider_hint(settings.provider));
  }

  RegistrationPolicy registration;
  registration.enabled = endpoint.needs_local_mr() || settings.always_register_memory;
  registration.provider_keys = (endpoint.info().domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
  registration.bind_to_endpoint = (endpoint.info().domain_attr->mr_mode & FI_MR_ENDPOINT) != 0;

  // Enrolled before the address is published: an in-process peer that reads it
  // finds the lifeline (in_process_peers.h).
  std::shared_ptr<Lifeline> lifeline =
      shares_in_process_peers(endpoint.provider()) ? Lifeline::enroll(endpoint.name()) : nullptr;
  std::vector<std::vector<uint8_t>> names;
  std::vector<fi_addr_t> peers =
      exchange_addresses(*options.store, endpoint, options.rank, options.world_size, options.timeout, &names);
  std::vector<std::shared_ptr<Lifeline>> in_process;
  if (lifeline) {
    for (const auto& name : names) {
      if (auto peer = name.empty() ? nullptr : Lifeline::find(name)) in_process.push_back(std::move(peer));
    }
  }
  return std::make_unique<FabricPipe>(options.rank, options.world_size, std::move(endpoint), std::move(peers), *tags,
                                      registration, std::move(lifeline), std::move(in_process));
}

}  // namespace thd::detail::libfabric
