// What every NCCL operation shares: its communicator (made on demand, one per
// group and one per pair of ranks that exchange messages), its enqueueing on the
// device's current stream, the Request that completes when the device has run it,
// and the waiting, health checks and aborts behind that Request.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <thd/datachannel.h>

#include "datachannel/group_state.h"
#include "datachannel/nccl/nccl_collectives.h"
#include "datachannel/nccl/nccl_communicator.h"
#include "datachannel/transport.h"

namespace thd::detail::nccl {

// One device operation, checked and ready to enqueue.
struct Launch {
  std::string op{};
  int device = -1;
  std::chrono::milliseconds timeout{0};
  // What the device reads or writes: held until the device has finished with it.
  std::vector<Tensor> keep{};
  size_t bytes = 0;  // Request::bytes()
  int source = -1;   // the world rank a receive reports (Request::source())
  // -1: the group's communicator; else the group rank of the other side of a
  // send or receive, which runs on the communicator of the pair.
  int pair_peer = -1;
  // Makes the NCCL calls on (communicator, stream): the result of the last one,
  // ncclSuccess or ncclInProgress (THD_NCCL_CALL throws the rest).
  std::function<ncclResult_t(ncclComm_t, cudaStream_t, const CallSite&)> enqueue{};
  // Enqueues what must follow the NCCL calls on the same stream (the rounding of
  // a 16-bit reduction run in float32); may be empty.
  std::function<void()> then{};
};

class Runner {
 public:
  Runner(int world_rank, int world_size);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Enqueues `launch` for group `g` (making the communicator first when needed)
  // and returns its Request. Throws, with nothing enqueued or the communicator
  // aborted, when it cannot.
  Request run(GroupState& g, Launch launch);

  // The device of the group's communicator, when it has one.
  std::optional<int> group_device(const GroupState& g);
  // DeviceCollectives::usable_on.
  bool usable_on(const GroupState& g, int device);
  NcclCollectives::Stats stats() const noexcept;

  // For the requests' engine: Request::wait and Request::cancel (and its expiry).
  bool wait(RequestState& request, net::Deadline until);
  void abandon(const std::shared_ptr<RequestState>& request, std::exception_ptr why);

 private:
  // What the host function behind an operation reports to.
  struct Completion {
    std::shared_ptr<RequestState> request;
    int source = -1;
    size_t bytes = 0;
    std::atomic<bool> device_done{false};
  };
  struct InFlight {
    std::shared_ptr<Completion> completion;
    std::shared_ptr<Communicator> comm;
    std::vector<Tensor> keep;
    std::weak_ptr<Transport> host;
    std::vector<int> members;  // world ranks
    CallSite site;
  };
  // One communicator, made once.
  struct Slot {
    std::mutex mu;  // held while it is made
    std::shared_ptr<Communicator> comm;
    std::exception_ptr setup_error;
  };
  // The requests' engine: waits and cancellations come back to the Runner.
  class Engine final : public Transport {
   public:
    Engine(Runner& owner, int rank, int size) : Transport(rank, size), owner_(owner) {}
    std::string_view name() const noexcept override { return "nccl"; }
    void post_send(std::span<const uint8_t>, int, const Envelope&, const std::shared_ptr<RequestState>& r) override;
    void post_recv(std::span<uint8_t>, int, const Envelope&, const std::shared_ptr<RequestState>& r) override;
    void cancel(const std::shared_ptr<RequestState>& r, std::exception_ptr why) override { owner_.abandon(r, why); }
    bool wait(RequestState& r, net::Deadline until) override { return owner_.wait(r, until); }
    std::exception_ptr peer_error(int) const override { return nullptr; }

   private:
    Runner& owner_;
  };

  static void on_device_done(void* completion) noexcept;

  std::shared_ptr<Communicator> communicator(GroupState& g, const Launch& launch, net::Deadline deadline,
                                             const CallSite& site);
  std::shared_ptr<Slot> slot(const std::string& key);
  int64_t instance(GroupState& g);
  // Aborts `comm` and fails every operation on it still running with `why`.
  void fail_communicator(const std::shared_ptr<Communicator>& comm, const std::exception_ptr& why);
  // An asynchronous NCCL error, or a lost member, of the operation behind `request`.
  void check_health(const RequestState& request);
  // Lets go of what operations the device has finished held.
  void reap();

  const int world_rank_;
  Engine engine_;
  std::atomic<uint64_t> created_{0};
  std::atomic<uint64_t> operations_{0};
  std::mutex instance_mu_;
  std::optional<int64_t> instance_;
  std::mutex slots_mu_;
  std::map<std::string, std::shared_ptr<Slot>> slots_;
  std::mutex flight_mu_;
  std::vector<InFlight> in_flight_;
};

}  // namespace thd::detail::nccl
