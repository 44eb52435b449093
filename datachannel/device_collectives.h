// Collectives on device (CUDA) tensors, run by a native library beside a channel's
// host transport. The DataChannel moves CPU tensors with thd's own algorithms over
// its Transport; a CUDA tensor goes to the channel's DeviceCollectives instead
// (NCCL's, datachannel/nccl/nccl_collectives.h). Backend-neutral on purpose: this
// header needs neither CUDA nor NCCL, so code built without them may hold one.
//
// Contract (docs/backends.md, "nccl"):
// - Every call checks its arguments on the calling rank first (member, ranks,
//   tensors on the device, dtypes, element counts) and throws before anything is
//   enqueued, as the host collectives do.
// - The operation is enqueued on the tensors' device, on that device's current
//   stream of the calling thread (thd::cuda::current_stream), and the call returns a
//   Request at once: later work on that stream sees the result without any wait.
//   Request::wait() blocks the host until the operation has finished on the device,
//   within the operation's deadline (options.timeout or the channel's).
// - A communicator is made for a group (and one for each pair of ranks that
//   exchange point-to-point) at the first device operation that needs it; every
//   member must take part in that first operation. Its set-up shares the deadline
//   of the operation that made it: a member that never arrives is a TimeoutError.
// - Device operations of one group form one sequence in issue order, whatever
//   their tag: every member must issue them in the same order (NCCL's rule).
// - After a device operation failed or timed out, the group's communicator is
//   aborted; later device operations on that group fail naming the first error
//   (make a new group to go on). Host operations of the channel are unaffected.
// - Every method may be called from any thread; calls on one group are serialized.
#pragma once

#include <cstdint>
#include <string_view>

#include <thd/datachannel.h>
#include <thd/tensor.h>

namespace thd::detail {

struct GroupState;

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;

  // The library's name, for messages ("nccl").
  virtual std::string_view name() const noexcept = 0;

  // The DataChannel collectives, with the same arguments and meaning
  // (include/thd/datachannel.h); every tensor on one device.
  virtual Request all_reduce(GroupState& g, Tensor& tensor, ReduceOp op, const CollectiveOptions& o) = 0;
  virtual Request broadcast(GroupState& g, Tensor& tensor, int root, const CollectiveOptions& o) = 0;
  virtual Request reduce(GroupState& g, Tensor& tensor, int root, ReduceOp op, const CollectiveOptions& o) = 0;
  virtual Request all_gather(GroupState& g, Tensor& output, const Tensor& input, const CollectiveOptions& o) = 0;
  virtual Request reduce_scatter(GroupState& g, Tensor& output, const Tensor& input, ReduceOp op,
                                 const CollectiveOptions& o) = 0;
  virtual Request gather(GroupState& g, Tensor& output, const Tensor& input, int root,
                         const CollectiveOptions& o) = 0;
  virtual Request scatter(GroupState& g, Tensor& output, const Tensor& input, int root,
                          const CollectiveOptions& o) = 0;
  virtual Request all_to_all(GroupState& g, Tensor& output, const Tensor& input, const CollectiveOptions& o) = 0;
  // Every member's device work issued before it on this group has finished when
  // its request completes (a one-element all-reduce on the group's device).
  virtual Request barrier(GroupState& g, const CollectiveOptions& o) = 0;

  // Point to point between two members. Messages between two ranks match in
  // issue order; tags do not separate them, and kAnySource is not supported.
  virtual Request send(GroupState& g, const Tensor& tensor, int dst, const P2POptions& o) = 0;
  virtual Request recv(GroupState& g, Tensor& tensor, int src, const P2POptions& o) = 0;

  // Whether a collective of group `g` on CUDA device `device` can go ahead: the
  // group has no communicator yet (and no failed set-up), or a healthy one on that
  // device. Lets a caller that has another way (staging through host memory) take
  // it instead of an error.
  virtual bool usable_on(GroupState& g, int device) = 0;
};

}  // namespace thd::detail
