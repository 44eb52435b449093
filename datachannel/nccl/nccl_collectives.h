// NCCL's collectives and point-to-point for CUDA tensors, for every group of one
// world channel: the DeviceCollectives (datachannel/device_collectives.h) of
// the nccl backend, and the way any other backend's channel reaches NCCL for CUDA
// tensors (nccl_backend.h, make_collectives).
//
// How an operation runs: arguments are checked on the calling rank; the group's
// communicator is made when the group first needs one (its members meet in the
// channel's store, nccl_rendezvous.h, then NCCL connects them, nccl_communicator.h);
// the NCCL call is enqueued on the device's current stream; a host function queued
// behind it completes the Request when the device gets there. Waiting on the
// Request polls NCCL's asynchronous errors and the host transport's lost peers
// against the operation's deadline, and aborts the communicator past it.
//
// This header includes neither CUDA nor NCCL.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "datachannel/device_collectives.h"

namespace thd::detail::nccl {

class NcclCollectives final : public DeviceCollectives {
 public:
  // For the world channel whose rank and size these are; the groups passed to the
  // operations must be that channel or groups made from it.
  NcclCollectives(int world_rank, int world_size);
  // Operations still running on the device are aborted (their requests fail); the
  // communicators are finalized and destroyed (aborted when they do not finish).
  ~NcclCollectives() override;
  NcclCollectives(const NcclCollectives&) = delete;
  NcclCollectives& operator=(const NcclCollectives&) = delete;

  std::string_view name() const noexcept override { return "nccl"; }

  Request all_reduce(GroupState& g, Tensor& tensor, ReduceOp op, const CollectiveOptions& o) override;
  Request broadcast(GroupState& g, Tensor& tensor, int root, const CollectiveOptions& o) override;
  Request reduce(GroupState& g, Tensor& tensor, int root, ReduceOp op, const CollectiveOptions& o) override;
  Request all_gather(GroupState& g, Tensor& output, const Tensor& input, const CollectiveOptions& o) override;
  Request reduce_scatter(GroupState& g, Tensor& output, const Tensor& input, ReduceOp op,
                         const CollectiveOptions& o) override;
  Request gather(GroupState& g, Tensor& output, const Tensor& input, int root, const CollectiveOptions& o) override;
  Request scatter(GroupState& g, Tensor& output, const Tensor& input, int root, const CollectiveOptions& o) override;
  Request all_to_all(GroupState& g, Tensor& output, const Tensor& input, const CollectiveOptions& o) override;
  Request barrier(GroupState& g, const CollectiveOptions& o) override;
  // A send or receive runs on a communicator of the two ranks alone (made at
  // their first message), so the rest of the group need not take part.
  Request send(GroupState& g, const Tensor& tensor, int dst, const P2POptions& o) override;
  Request recv(GroupState& g, Tensor& tensor, int src, const P2POptions& o) override;
  bool usable_on(GroupState& g, int device) override;

  // Sends and receives issued as one NCCL group on the group's communicator
  // (torch's batch_isend_irecv): they progress together, so a rank may message
  // itself, and a ring exchange cannot deadlock. Every member of the group takes
  // part in the call that first makes the group's communicator.
  struct P2PItem {
    enum class Kind : uint8_t { Send, Recv };
    Kind kind;
    Tensor tensor;  // a send's is read; a receive's (contiguous) is written
    int peer;       // group rank
  };
  Request batch_send_recv(GroupState& g, std::vector<P2PItem> items, const CollectiveOptions& o);

  // What this object has done so far (tests check that communicators are reused).
  struct Stats {
    uint64_t communicators_created = 0;
    uint64_t operations = 0;  // enqueued on a device
  };
  Stats stats() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace thd::detail::nccl
