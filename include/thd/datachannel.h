// thd::DataChannel: point-to-point messages and collectives among the ranks of a
// job (torch.distributed's ProcessGroup, THD's DataChannel, an MPI communicator).
//
// One DataChannel object is one group of ranks over one backend ("tcp", "mpi", ...).
// DataChannel::create() makes the world group; new_group() makes subgroups of it,
// which are DataChannels too, with their own rank numbering (0..size()-1 within the
// group) and their own message space: traffic of one group never matches another's.
//
// Contract (docs/datachannel.md has the whole of it):
// - Buffers: a tensor passed to an async call is kept alive by the Request until it
//   completes; its bytes must not be touched by the caller until then. Raw byte
//   spans are the caller's to keep alive. Tensors must be CPU tensors here (CUDA
//   tensors belong to the nccl backend).
// - Blocking forms return when this rank's part is done (the data is in the output,
//   or the input may be reused). Async forms return a Request at once.
// - Point-to-point messages between two ranks with the same tag are received in the
//   order they were sent (MPI's non-overtaking rule). A message is matched by
//   (source, tag); its size and dtype must equal the receive's, else the receive
//   fails with a ValueError/TypeError naming both.
// - Collectives on one group run in the order they are issued, one at a time, and
//   every member must issue the same sequence (per tag: collectives with different
//   CollectiveOptions::tag form independent sequences, so two threads may run
//   collectives on one group concurrently if each uses its own tag). A rank that
//   receives a message of a different collective than the one it runs fails with an
//   error naming both calls (TypeError when only the dtypes differ, ValueError
//   otherwise); the ranks waiting on it fail at their deadline.
// - Every wait has a deadline: the op's options.timeout, or the channel's timeout.
//   Past it the op fails with thd::TimeoutError and its buffers are released. After
//   a collective failed (timeout, lost peer, mismatch) the members may disagree on
//   where the sequence of that tag stands: later collectives on that tag are not
//   guaranteed to work (use another tag or a new group); point-to-point keeps working.
// - A rank whose process dies fails every pending and later operation that needs it
//   with thd::PeerLost naming the rank.
// - Every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <thd/store.h>
#include <thd/tensor.h>

namespace thd {

enum class ReduceOp : uint8_t {
  Sum,
  Prod,
  Min,
  Max,
  Avg,   // floating-point dtypes only
  BAnd,  // integer and bool dtypes only
  BOr,
  BXor,
};
std::string_view reduce_op_name(ReduceOp op);

// recv/irecv from whichever rank sends first; the Request reports who it was.
inline constexpr int kAnySource = -1;

// torch's default process-group timeout.
inline constexpr std::chrono::milliseconds kDefaultDataChannelTimeout = std::chrono::minutes(30);

struct P2POptions {
  // Matches a send with a receive; any value >= 0.
  int64_t tag = 0;
  // 0: the channel's timeout.
  std::chrono::milliseconds timeout{0};
  // A thread waiting on this request only sleeps until the backend completes it; it
  // never spins or drives the backend's progress itself, so a listener on a
  // background thread takes no CPU from the program's own waits. Its completion
  // may come up to about a millisecond later while other threads drive progress.
  bool passive_wait = false;
  // A thread waiting on this request first drives the backend's progress itself for
  // up to this long, giving its core away between polls (sched_yield), whatever the
  // backend's spin policy would do, and only then waits as usual (spin, block). For
  // a wait that should end soon and whose latency matters more than the CPU it
  // takes: a stream waiting for another node's event (CUDA's
  // cudaDeviceScheduleYield). 0: the backend's policy alone. Ignored with
  // passive_wait.
  std::chrono::microseconds yield_spin{0};
};

struct CollectiveOptions {
  // Collectives with different tags are independent sequences; 0 .. 2^31-1.
  int64_t tag = 0;
  // 0: the channel's timeout.
  std::chrono::milliseconds timeout{0};
};

namespace detail {
struct RequestState;
struct ChannelAccess;  // datachannel/channel_access.h: the datachannel's own way in
}

// What Request::wait_for saw: the operation finished, or it is still pending.
enum class WaitStatus { Ready, Timeout };

// A message received whatever its length (DataChannel::recv_message): its bytes,
// in a buffer the channel sized when the message matched, and who sent it.
class Message {
 public:
  Message() = default;
  Message(std::unique_ptr<uint8_t[]> bytes, size_t size, int source) noexcept
      : bytes_(std::move(bytes)), size_(size), source_(source) {}

  const uint8_t* data() const noexcept { return bytes_.get(); }
  uint8_t* data() noexcept { return bytes_.get(); }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::span<const uint8_t> bytes() const noexcept { return {bytes_.get(), size_}; }
  operator std::span<const uint8_t>() const noexcept { return bytes(); }
  // The sender's rank in the group the message was received on; -1 for none.
  int source() const noexcept { return source_; }

 private:
  std::unique_ptr<uint8_t[]> bytes_;
  size_t size_ = 0;
  int source_ = -1;
};

// The handle of an async operation (torch's Work, MPI_Request). Copies share the
// operation. A default-constructed Request is already complete.
class Request {
 public:
  Request() = default;

  // True once the operation has finished, successfully or not. Never blocks,
  // never throws.
  bool test() const;
  // Blocks until the operation finishes (or its own deadline passes) and throws
  // its error if it failed.
  void wait() const;
  // As wait(), but gives up after `timeout`: TimeoutError naming the op. The
  // operation itself stays pending (its own deadline still applies) and may be
  // waited on again.
  void wait(std::chrono::milliseconds timeout) const;
  // Waits up to `timeout` and says whether the operation finished (std::future's
  // wait_for): Ready once it has, Timeout while it is still pending, which is not
  // an error and raises nothing. A failed operation throws its error, and one past
  // its own deadline fails with TimeoutError as wait() does.
  [[nodiscard]] WaitStatus wait_for(std::chrono::milliseconds timeout) const;

  // After a successful wait: the rank (in the group) a receive got its message
  // from, and how many bytes it moved. -1 / 0 for other ops.
  int source() const;
  size_t bytes() const;
  // The error of a failed operation, nullptr otherwise (or while pending).
  std::exception_ptr error() const;
  // After a successful wait on an irecv_message: the message, moved out (the
  // request keeps an empty one). ValueError for another kind of request, one not
  // finished well, or a message already taken.
  Message take_message() const;
  // torch's Work names: is_completed() is test(), exception() is error().
  bool is_completed() const { return test(); }
  std::exception_ptr exception() const { return error(); }
  // Withdraws a pending point-to-point operation (MPI_Cancel): it fails with `why`
  // (default: a thd::Error saying it was cancelled) and the backend stops touching
  // its buffer. A finished request is left as it is. ValueError for a collective's
  // request, pending or finished: it cannot be withdrawn on one rank alone.
  void cancel(std::exception_ptr why = nullptr) const;

  // Made by the DataChannel's calls, which return it.
  explicit Request(std::shared_ptr<detail::RequestState> state) : state_(std::move(state)) {}

 private:
  friend struct detail::ChannelAccess;
  std::shared_ptr<detail::RequestState> state_;
};

// torch.distributed's name for the handle of an async operation.
using Work = Request;

// Waits for every request (each with its own deadline) and throws the first error.
void wait_all(std::span<const Request> requests);

struct DataChannelOptions {
  // The job's rendezvous store (thd::rendezvous gives one): backends exchange their
  // addresses through it and groups agree on their ids through it. Required.
  std::shared_ptr<Store> store;
  int rank = -1;
  int world_size = -1;
  // Default deadline of every operation; also bounds connection set-up.
  std::chrono::milliseconds timeout = kDefaultDataChannelTimeout;
  // The shared secret every connection proves; when unset, THD_AUTH_TOKEN or
  // THD_AUTH_TOKEN_FILE (see docs/security.md).
  std::optional<std::string> token = std::nullopt;
  // The address this rank listens on (tcp): loopback unless told otherwise.
  // "0.0.0.0" listens everywhere; peers connect to the address published in the store.
  std::string bind_host = "127.0.0.1";
};

// What this rank's transport was given to move, over every group of its world:
// bytes and messages handed to it to send, and receives posted (each the size of
// the message it takes).
struct ChannelTraffic {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
};

namespace detail {
class Transport;
struct GroupState;
}

class DataChannel : public std::enable_shared_from_this<DataChannel> {
 public:
  // The world group over the named backend. Every rank of the job calls it with the
  // same backend and store. ValueError for an unknown backend or one not built,
  // listing what is available; the backend's errors for everything else.
  static std::shared_ptr<DataChannel> create(const std::string& backend, const DataChannelOptions& options);
  // The backends compiled into this build, sorted.
  static std::vector<std::string> available_backends();

  ~DataChannel();
  DataChannel(const DataChannel&) = delete;
  DataChannel& operator=(const DataChannel&) = delete;

  // This rank within the group, and the group's size. A rank outside a group
  // (see new_group) has rank() -1 and every operation throws.
  int rank() const noexcept;
  int size() const noexcept;
  bool is_member() const noexcept { return rank() >= 0; }
  const std::string& backend() const noexcept;
  // The group's members as ranks of the world group, in group-rank order.
  const std::vector<int>& world_ranks() const noexcept;
  std::chrono::milliseconds timeout() const noexcept;
  ChannelTraffic traffic() const noexcept;

  // A subgroup of this group: `ranks` are ranks of this group (distinct, in range),
  // and group rank i is ranks[i]. Every member calls it with the same list; other
  // ranks may call it too and get a non-member channel (rank() == -1). Groups are
  // matched by their member list through the store, so members may create
  // different groups in different orders.
  std::shared_ptr<DataChannel> new_group(std::vector<int> ranks,
                                         std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  // ---- point to point -------------------------------------------------------------
  // Tensors travel as their bytes in row-major order; the receiving tensor must
  // have the same dtype and number of elements (shapes may differ).
  void send(const Tensor& tensor, int dst, const P2POptions& options = {});
  // Returns the rank the message came from (useful with kAnySource).
  int recv(Tensor& tensor, int src, const P2POptions& options = {});
  Request isend(const Tensor& tensor, int dst, const P2POptions& options = {});
  Request irecv(Tensor& tensor, int src, const P2POptions& options = {});

  void send_bytes(std::span<const uint8_t> data, int dst, const P2POptions& options = {});
  // The message must have exactly data.size() bytes.
  int recv_bytes(std::span<uint8_t> data, int src, const P2POptions& options = {});
  Request isend_bytes(std::span<const uint8_t> data, int dst, const P2POptions& options = {});
  Request irecv_bytes(std::span<uint8_t> data, int src, const P2POptions& options = {});
  // The next message of bytes from `src` (or kAnySource) on options.tag, whatever
  // its length (MPI_Mprobe + MPI_Mrecv): the channel makes its buffer once the
  // message matched. A message over `max_bytes` fails the receive with ValueError
  // naming both lengths and is discarded; a tensor's message where bytes belong
  // fails it with TypeError. Messages of any length and of a fixed one
  // (recv_bytes) may share a tag: they match in send order either way.
  Message recv_message(int src, size_t max_bytes, const P2POptions& options = {});
  // Request::take_message gives the message once it is in.
  Request irecv_message(int src, size_t max_bytes, const P2POptions& options = {});

  // ---- collectives (torch.distributed semantics) -------------------------------------
  // In place: `tensor` on every rank ends up as the op over every rank's tensor.
  void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum, const CollectiveOptions& options = {});
  Request iall_reduce(Tensor& tensor, ReduceOp op = ReduceOp::Sum, const CollectiveOptions& options = {});
  // `tensor` of root is copied into `tensor` of every other rank.
  void broadcast(Tensor& tensor, int root, const CollectiveOptions& options = {});
  Request ibroadcast(Tensor& tensor, int root, const CollectiveOptions& options = {});
  // Root's `tensor` ends up as the op over every rank's; other ranks' are unchanged.
  void reduce(Tensor& tensor, int root, ReduceOp op = ReduceOp::Sum, const CollectiveOptions& options = {});
  Request ireduce(Tensor& tensor, int root, ReduceOp op = ReduceOp::Sum, const CollectiveOptions& options = {});
  // output (size() * input.numel() elements, e.g. shape [size(), ...]) receives
  // every rank's input, in rank order.
  void all_gather(Tensor& output, const Tensor& input, const CollectiveOptions& options = {});
  Request iall_gather(Tensor& output, const Tensor& input, const CollectiveOptions& options = {});
  // input holds size() equal blocks; rank r's output is the op over every rank's block r.
  void reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum,
                      const CollectiveOptions& options = {});
  Request ireduce_scatter(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::Sum,
                          const CollectiveOptions& options = {});
  // As all_gather, but only root's output is written; other ranks may pass an
  // undefined output.
  void gather(Tensor& output, const Tensor& input, int root, const CollectiveOptions& options = {});
  Request igather(Tensor& output, const Tensor& input, int root, const CollectiveOptions& options = {});
  // Root's input holds size() blocks; rank r receives block r. Other ranks may
  // pass an undefined input.
  void scatter(Tensor& output, const Tensor& input, int root, const CollectiveOptions& options = {});
  Request iscatter(Tensor& output, const Tensor& input, int root, const CollectiveOptions& options = {});
  // input and output hold size() blocks; block j of rank i's input lands in block i
  // of rank j's output.
  void all_to_all(Tensor& output, const Tensor& input, const CollectiveOptions& options = {});
  Request iall_to_all(Tensor& output, const Tensor& input, const CollectiveOptions& options = {});
  void barrier(const CollectiveOptions& options = {});
  Request ibarrier(const CollectiveOptions& options = {});

  // Closes this channel and every group made from it (torch's shutdown): later
  // calls on any of them throw ValueError; operations already issued finish or
  // fail at their deadline. The connections close when the last group is released.
  void shutdown();
  bool is_shut_down() const noexcept;

  // Use create() / new_group().
  explicit DataChannel(std::unique_ptr<detail::GroupState> state);

 private:
  friend struct detail::ChannelAccess;
  detail::GroupState& state() noexcept { return *state_; }

  std::unique_ptr<detail::GroupState> state_;
};

// A process group is a DataChannel (torch's name for it).
using ProcessGroup = DataChannel;

}  // namespace thd
