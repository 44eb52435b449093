// DataChannel: creation, groups, and what every call shares.
#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <thd/datachannel.h>

#include "datachannel/channel_util.h"
#include "datachannel/backends.h"
#include "datachannel/check.h"
#include "datachannel/net/auth.h"
#include "datachannel/recycling_allocator.h"
#include "datachannel/registry.h"
#include "datachannel/runtime_queries.h"

namespace thd {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::BAnd: return "band";
    case ReduceOp::BOr: return "bor";
    case ReduceOp::BXor: return "bxor";
  }
  return "unknown";
}

namespace detail {

uint32_t GroupState::next_sequence(int64_t tag) {
  std::lock_guard lock(mu_);
  return sequences_[tag]++;
}

CollectiveQueue& GroupState::queue(int64_t tag) {
  std::lock_guard lock(mu_);
  auto& q = queues_[tag];
  if (!q) q = std::make_unique<CollectiveQueue>();
  return *q;
}

int GroupState::count_creation(const std::vector<int>& members) {
  std::lock_guard lock(mu_);
  return creations_[members]++;
}

void throw_not_member(const GroupState& g, std::string_view op) {
  if (g.shut_down->load(std::memory_order_acquire)) {
    THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1,
                 "the channel was shut down (DataChannel::shutdown or thd::destroy_process_group); create a new "
                 "one");
  }
  THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1,
               "this rank (world rank {}) is not a member of the group (world ranks {}); only members may "
               "call its operations",
               g.world_rank(), *g.world_ranks);
}

void throw_bad_rank(const GroupState& g, int r, std::string_view op, std::string_view what, bool any_ok) {
  THD_THROW_AT(IndexError, std::string(op), g.world_rank(), -1, "{} rank {} is out of range for a group of size {}{}",
               what, r, g.size(), any_ok ? " (or kAnySource)" : "");
}

void check_tensor(const GroupState& g, const Tensor& t, std::string_view op, std::string_view what,
                  bool must_be_contiguous) {
  if (!t.defined()) {
    THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1, "{} is an undefined tensor", what);
  }
  if (!t.device().is_cpu()) {
    THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1,
                 "{} is on {}; the {} backend moves CPU tensors (CUDA tensors need the nccl backend)", what,
                 t.device().str(), g.backend);
  }
  if (must_be_contiguous && !t.is_contiguous()) {
    THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1,
                 "{} must be contiguous, since it is written in place (shape {}, strides {}); receive into "
                 "t.contiguous() and copy back",
                 what, t.shape(), t.strides());
  }
}

void throw_bad_tag(const GroupState& g, int64_t tag, std::string_view op, int64_t max) {
  THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1, "tag {} is out of range [0, {}]", tag, max);
}

std::chrono::milliseconds resolve_timeout(const GroupState& g, std::chrono::milliseconds requested) {
  return requested.count() > 0 ? requested : g.timeout;
}

DeviceCollectives& device_collectives(GroupState& g, std::string_view op) {
  if (DeviceCollectives* own = g.transport->device_collectives()) return *own;
  std::lock_guard lock(g.device->mu);
  if (!g.device->collectives) {
    g.device->collectives = make_device_collectives(g.transport->rank(), g.transport->size());
  }
  if (!g.device->collectives) {
    THD_THROW_AT(NotImplementedError, std::string(op), g.world_rank(), -1,
                 "CUDA tensors on a DataChannel go through NCCL, and {}; or move the tensor to the CPU (t.cpu())",
                 detail::missing_device_collectives());
  }
  return *g.device->collectives;
}

bool device_collectives_usable(GroupState& g, int device) {
  try {
    return device_collectives(g, "collective").usable_on(g, device);
  } catch (const NotImplementedError&) {
    return false;  // built without them
  }
}

bool device_collectives_usable(DataChannel& channel, int device) {
  return device_collectives_usable(detail::state_of(channel), device);
}

std::exception_ptr peer_lost_error(DataChannel& channel, int rank) {
  const GroupState& g = detail::state_of(channel);
  if (rank < 0 || rank >= g.size() || !g.transport) return nullptr;
  return g.transport->peer_error((*g.world_ranks)[static_cast<size_t>(rank)]);
}

std::shared_ptr<RequestState> make_request(const GroupState& g, OpLabel op, std::chrono::milliseconds timeout,
                                           Transport* engine) {
  auto s = std::allocate_shared<RequestState>(RecyclingAllocator<RequestState>(), std::move(op),
                                             net::coarse_deadline_after(timeout), engine, g.world_rank());
  if (g.id != 0) s->group_ranks = g.world_ranks;
  return s;
}

std::shared_ptr<RequestState> make_request(const GroupState& g, const RequestSpec& spec, Transport* engine) {
  auto s = std::allocate_shared<RequestState>(RecyclingAllocator<RequestState>(), spec, engine);
  if (spec.keep != nullptr) s->kept_storage = spec.keep->storage();
  if (g.id != 0) s->group_ranks = g.world_ranks;
  return s;
}

}  // namespace detail

namespace {

using detail::GroupState;

std::shared_ptr<const std::vector<int>> iota_ranks(int n) {
  auto v = std::make_shared<std::vector<int>>(n);
  for (int i = 0; i < n; ++i) (*v)[i] = i;
  return v;
}

}  // namespace

DataChannel::DataChannel(std::unique_ptr<detail::GroupState> state) : state_(std::move(state)) {}
DataChannel::~DataChannel() = default;

std::shared_ptr<DataChannel> DataChannel::create(const std::string& backend, const DataChannelOptions& options) {
  const auto make_transport = detail::find_backend(backend).make_transport;
  if (!options.store) {
    THD_THROW(ValueError, "DataChannel::create", "options.store is required (thd::rendezvous gives one)");
  }
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    THD_THROW(ValueError, "DataChannel::create", "rank {} and world_size {} are not valid (0 <= rank < world_size)",
              options.rank, options.world_size);
  }
  if (options.timeout.count() <= 0) {
    THD_THROW(ValueError, "DataChannel::create", "timeout must be positive, got {} ms", options.timeout.count());
  }
  // The k-th channel a rank creates meets the k-th of every other rank in a
  // namespace of its own, so channels made one after another over one store
  // never read each other's addresses or group ids.
  const int64_t instance = options.store->add(fmt::format("dc/created/{}", options.rank), 1);
  auto store = std::make_shared<PrefixStore>(fmt::format("dc/{}/{}", backend, instance), options.store);
  DataChannelOptions transport_options = options;
  transport_options.store = std::make_shared<PrefixStore>("transport", store);
  // A launcher that spreads ranks over hosts says which address this host's ranks
  // listen on; a program that left the loopback default need not know.
  if (options.bind_host == DataChannelOptions{}.bind_host) {
    if (auto host = net::process_env("THD_BIND_HOST"); host && !host->empty()) transport_options.bind_host = *host;
  }

  auto g = std::make_unique<GroupState>();
  g->backend = backend;
  g->transport = make_transport(transport_options);
  g->store = store;
  g->world_ranks = iota_ranks(options.world_size);
  g->rank = options.rank;
  g->id = 0;
  g->timeout = options.timeout;
  return std::make_shared<DataChannel>(std::move(g));
}

void DataChannel::shutdown() { state_->shut_down->store(true, std::memory_order_release); }
bool DataChannel::is_shut_down() const noexcept { return state_->shut_down->load(std::memory_order_acquire); }

std::vector<std::string> DataChannel::available_backends() { return detail::built_backends(); }

int DataChannel::rank() const noexcept { return state_->rank; }
int DataChannel::size() const noexcept { return state_->size(); }
const std::string& DataChannel::backend() const noexcept { return state_->backend; }
const std::vector<int>& DataChannel::world_ranks() const noexcept { return *state_->world_ranks; }
std::chrono::milliseconds DataChannel::timeout() const noexcept { return state_->timeout; }
ChannelTraffic DataChannel::traffic() const noexcept { return state_->transport->traffic(); }

std::shared_ptr<DataChannel> DataChannel::new_group(std::vector<int> ranks,
                                                    std::optional<std::chrono::milliseconds> timeout) {
  const char* op = "new_group";
  GroupState& parent = *state_;
  detail::check_member(parent, op);
  if (ranks.empty()) THD_THROW_AT(ValueError, op, parent.world_rank(), -1, "a group needs at least one rank");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    detail::check_rank(parent, sorted[i], op, "member");
    if (i > 0 && sorted[i] == sorted[i - 1]) {
      THD_THROW_AT(ValueError, op, parent.world_rank(), -1, "rank {} is listed twice in {}", sorted[i], ranks);
    }
  }
  if (timeout && timeout->count() <= 0) {
    THD_THROW_AT(ValueError, op, parent.world_rank(), -1, "timeout must be positive, got {} ms", timeout->count());
  }

  auto g = std::make_unique<GroupState>();
  g->backend = parent.backend;
  g->transport = parent.transport;
  g->store = parent.store;
  auto world = std::make_shared<std::vector<int>>();
  for (int r : ranks) world->push_back((*parent.world_ranks)[r]);
  g->world_ranks = world;
  g->timeout = timeout.value_or(parent.timeout);
  g->shut_down = parent.shut_down;
  g->device = parent.device;
  g->rank = detail::position_in(ranks, parent.rank);
  if (g->rank < 0) {
    g->id = UINT32_MAX;  // never used: every operation of a non-member throws first
    return std::make_shared<DataChannel>(std::move(g));
  }

  // Members agree on an id by the member list (and how many groups with that
  // list came before), so the order groups are created in does not matter.
  // Each member draws a fresh id; the first to claim the name wins.
  const std::string name = fmt::format("groups/{}/{}/{}", parent.id, fmt::join(*world, ","),
                                       parent.count_creation(*world));
  const int64_t candidate = parent.store->add("groups/next_id", 1);
  const std::string agreed = parent.store->compare_set(name, "", std::to_string(candidate));
  uint32_t id = 0;
  const auto [ptr, ec] = std::from_chars(agreed.data(), agreed.data() + agreed.size(), id);
  if (ec != std::errc() || ptr != agreed.data() + agreed.size() || id == 0 || id >= UINT32_MAX / 2) {
    THD_THROW_AT(ValueError, op, parent.world_rank(), -1, "the store holds a malformed group id '{}' for {}",
                 agreed, name);
  }
  g->id = id;
  return std::make_shared<DataChannel>(std::move(g));
}

}  // namespace thd
