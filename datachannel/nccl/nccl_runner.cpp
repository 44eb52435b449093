#include "datachannel/nccl/nccl_runner.h"

#include <algorithm>
#include <iterator>
#include <thread>

#include <fmt/format.h>

#include <thd/error.h>

#include "datachannel/channel_util.h"
#include "datachannel/check.h"
#include "datachannel/nccl/nccl_rendezvous.h"
#include "datachannel/nccl/nccl_util.h"
#include "tensor/cuda/cuda_check.h"
#include "tensor/cuda/cuda_stream.h"

namespace thd::detail::nccl {

namespace {

// How often a waiter looks for NCCL's asynchronous errors and lost peers. The
// operation's own completion wakes it at once; this only bounds how late a
// failure is noticed.
constexpr std::chrono::milliseconds kHealthCheckEvery{5};
// How long a closing Runner gives aborted operations to leave the device before
// the memory they used goes back to the allocator.
constexpr std::chrono::seconds kAbortDrain{2};

}  // namespace

void Runner::Engine::post_send(std::span<const uint8_t>, int, const Envelope&, const std::shared_ptr<RequestState>& r) {
  r->fail(error_at<Error>({"nccl", rank(), -1}, __FILE__, __LINE__, "the NCCL engine moves no host messages"));
}

void Runner::Engine::post_recv(std::span<uint8_t>, int, const Envelope&, const std::shared_ptr<RequestState>& r) {
  r->fail(error_at<Error>({"nccl", rank(), -1}, __FILE__, __LINE__, "the NCCL engine moves no host messages"));
}

Runner::Runner(int world_rank, int world_size) : world_rank_(world_rank), engine_(*this, world_rank, world_size) {}

Runner::~Runner() {
  std::vector<InFlight> all;
  {
    std::lock_guard lock(flight_mu_);
    all.swap(in_flight_);
  }
  for (auto& op : all) {
    if (op.completion->device_done.load(std::memory_order_acquire)) continue;
    const auto why = error_at<ValueError>(op.site, __FILE__, __LINE__,
                                          "the channel was closed while this operation ran on the device; its NCCL "
                                          "communicator was aborted");
    op.comm->abort(why);
    op.completion->request->fail(why);
  }
  // An aborted kernel leaves the device shortly; its buffers must not be reused before.
  const auto until = net::Clock::now() + kAbortDrain;
  for (auto& op : all) {
    while (!op.completion->device_done.load(std::memory_order_acquire) && net::Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  all.clear();
  std::lock_guard lock(slots_mu_);
  slots_.clear();
}

void Runner::on_device_done(void* completion) noexcept {
  // Runs on a CUDA runtime thread: no CUDA calls here, and nothing that frees device
  // memory (the tensors an operation holds are let go by reap(), on a thd thread).
  std::unique_ptr<std::shared_ptr<Completion>> token(static_cast<std::shared_ptr<Completion>*>(completion));
  Completion& c = **token;
  c.device_done.store(true, std::memory_order_release);
  c.request->complete(c.source, c.bytes);
}

Request Runner::run(GroupState& g, Launch launch) {
  reap();
  const int peer_world = launch.pair_peer < 0 ? -1 : (*g.world_ranks)[static_cast<size_t>(launch.pair_peer)];
  const CallSite site{launch.op, g.world_rank(), launch.source >= 0 ? launch.source : peer_world};
  auto request = make_request(g, launch.op, launch.timeout, &engine_);
  const net::Deadline deadline = request->deadline();
  std::shared_ptr<Communicator> comm = communicator(g, launch, deadline, site);

  auto completion = std::make_shared<Completion>();
  completion->request = request;
  completion->source = launch.source;
  completion->bytes = launch.bytes;

  std::exception_ptr failure;
  bool nccl_touched = false;  // from here on a failure leaves NCCL in an unknown state
  bool enqueued = false;      // the operation is on the stream: its tensors must outlive it
  {
    auto lock = comm->lock();
    try {
      const ncclComm_t handle = comm->handle(site);
      cuda::DeviceGuard on_device(launch.device);
      const cudaStream_t stream = cuda::current_stream(launch.device);
      nccl_touched = true;
      comm->finish(launch.enqueue(handle, stream, site), deadline, site);
      enqueued = true;
      if (launch.then) launch.then();
      auto* token = new std::shared_ptr<Completion>(completion);
      if (const cudaError_t err = cudaLaunchHostFunc(stream, &Runner::on_device_done, token); err != cudaSuccess) {
        delete token;
        THD_CUDA_CHECK(err, launch.op.c_str());
      }
    } catch (...) {
      failure = std::current_exception();
    }
  }
  std::vector<int> members;
  if (launch.pair_peer < 0) {
    members = *g.world_ranks;
  } else {
    members = {g.world_rank(), peer_world};
  }
  if (enqueued) {
    std::lock_guard lock(flight_mu_);
    in_flight_.push_back({completion, comm, std::move(launch.keep), g.transport, std::move(members), site});
  }
  if (failure) {
    // NCCL's rule: after an error, a communicator is aborted.
    if (nccl_touched) fail_communicator(comm, failure);
    std::rethrow_exception(failure);
  }
  operations_.fetch_add(1, std::memory_order_relaxed);
  return Request(std::move(request));
}

std::shared_ptr<Runner::Slot> Runner::slot(const std::string& key) {
  std::lock_guard lock(slots_mu_);
  auto& s = slots_[key];
  if (!s) s = std::make_shared<Slot>();
  return s;
}

int64_t Runner::instance(GroupState& g) {
  // The k-th Runner of a rank that makes a communicator over this channel's store
  // meets the k-th of every other rank, so two of them never read each other's ids.
  std::lock_guard lock(instance_mu_);
  if (!instance_) instance_ = g.store->add(fmt::format("nccl/instances/{}", world_rank_), 1);
  return *instance_;
}

std::shared_ptr<Communicator> Runner::communicator(GroupState& g, const Launch& launch, net::Deadline deadline,
                                                   const CallSite& site) {
  std::string key = fmt::format("group{}", g.id);
  std::vector<int> members = *g.world_ranks;
  int me = g.rank;
  if (launch.pair_peer >= 0) {
    const int low = std::min(g.rank, launch.pair_peer);
    const int high = std::max(g.rank, launch.pair_peer);
    key += fmt::format("/pair{}-{}", low, high);
    members = {(*g.world_ranks)[static_cast<size_t>(low)], (*g.world_ranks)[static_cast<size_t>(high)]};
    me = g.rank == low ? 0 : 1;
  }
  const auto s = slot(key);
  std::lock_guard lock(s->mu);
  if (s->comm) {
    if (s->comm->device() != launch.device) {
      THD_THROW_AT(ValueError, site.op, site.rank, site.peer,
                   "the tensor is on cuda:{} but this group's NCCL communicator runs on cuda:{} (made by its first "
                   "device operation); NCCL runs a rank on one GPU: move the tensor there (t.cuda({}))",
                   launch.device, s->comm->device(), s->comm->device());
    }
    return s->comm;
  }
  if (s->setup_error) {
    THD_THROW_AT(ValueError, site.op, site.rank, site.peer,
                 "setting up this group's NCCL communicator failed earlier ({}); device operations on this group "
                 "cannot go on: make a new group (DataChannel::new_group)",
                 what_of(s->setup_error));
  }
  try {
    const int64_t inst = instance(g);
    const std::string prefix = fmt::format("nccl/{}/{}", inst, key);
    const Placement mine = placement_of(launch.device, site);
    const ncclUniqueId id = meet(*g.store, prefix, members, me, mine, deadline, site);
    s->comm = std::make_shared<Communicator>(id, static_cast<int>(members.size()), me, launch.device, deadline, site,
                                             fmt::format("thd/{}/{}", inst, key));
    created_.fetch_add(1, std::memory_order_relaxed);
    return s->comm;
  } catch (...) {
    s->setup_error = std::current_exception();
    throw;
  }
}

bool Runner::usable_on(const GroupState& g, int device) {
  std::shared_ptr<Slot> s;
  {
    std::lock_guard lock(slots_mu_);
    const auto it = slots_.find(fmt::format("group{}", g.id));
    if (it == slots_.end()) return true;
    s = it->second;
  }
  std::lock_guard lock(s->mu);
  if (s->setup_error) return false;
  return !s->comm || (s->comm->device() == device && !s->comm->broken());
}

std::optional<int> Runner::group_device(const GroupState& g) {
  std::shared_ptr<Slot> s;
  {
    std::lock_guard lock(slots_mu_);
    const auto it = slots_.find(fmt::format("group{}", g.id));
    if (it == slots_.end()) return std::nullopt;
    s = it->second;
  }
  std::lock_guard lock(s->mu);
  if (!s->comm) return std::nullopt;
  return s->comm->device();
}

NcclCollectives::Stats Runner::stats() const noexcept {
  return {created_.load(std::memory_order_relaxed), operations_.load(std::memory_order_relaxed)};
}

bool Runner::wait(RequestState& request, net::Deadline until) {
  for (;;) {
    if (request.finished()) break;
    const auto now = net::Clock::now();
    if (now >= until) return false;
    request.block_until(std::min(until, now + kHealthCheckEvery));
    if (request.finished()) break;
    check_health(request);
  }
  reap();
  return true;
}

void Runner::abandon(const std::shared_ptr<RequestState>& request, std::exception_ptr why) {
  std::shared_ptr<Communicator> comm;
  {
    std::lock_guard lock(flight_mu_);
    for (const auto& op : in_flight_) {
      if (op.completion->request == request) comm = op.comm;
    }
  }
  request->fail(why);
  // NCCL cannot withdraw one operation: the communicator goes, and with it every
  // operation still running on it.
  if (comm) fail_communicator(comm, why);
}

void Runner::fail_communicator(const std::shared_ptr<Communicator>& comm, const std::exception_ptr& why) {
  comm->abort(why);
  std::vector<std::shared_ptr<Completion>> victims;
  {
    std::lock_guard lock(flight_mu_);
    for (const auto& op : in_flight_) {
      if (op.comm == comm && !op.completion->device_done.load(std::memory_order_acquire)) {
        victims.push_back(op.completion);
      }
    }
  }
  for (const auto& v : victims) v->request->fail(why);
}

void Runner::check_health(const RequestState& request) {
  std::shared_ptr<Communicator> comm;
  std::weak_ptr<Transport> host;
  std::vector<int> members;
  CallSite site;
  {
    std::lock_guard lock(flight_mu_);
    const auto it = std::find_if(in_flight_.begin(), in_flight_.end(),
                                 [&](const InFlight& op) { return op.completion->request.get() == &request; });
    if (it == in_flight_.end()) return;
    comm = it->comm;
    host = it->host;
    members = it->members;
    site = it->site;
  }
  std::exception_ptr problem = comm->poll_error(site);
  if (!problem) {
    // The host transport sees a dead rank long before any NCCL timeout would.
    if (const auto transport = host.lock()) {
      for (int member : members) {
        if (member == world_rank_) continue;
        if (auto lost = transport->peer_error(member); lost && !transport->peer_departed(member)) {
          problem = lost;
          break;
        }
      }
    }
  }
  if (problem) fail_communicator(comm, problem);
}

void Runner::reap() {
  std::vector<InFlight> done;
  {
    std::lock_guard lock(flight_mu_);
    const auto finished = std::stable_partition(in_flight_.begin(), in_flight_.end(), [](const InFlight& op) {
      return !op.completion->device_done.load(std::memory_order_acquire);
    });
    std::move(finished, in_flight_.end(), std::back_inserter(done));
    in_flight_.erase(finished, in_flight_.end());
  }
  // `done` lets go of the tensors here, outside the lock.
}

}  // namespace thd::detail::nccl
