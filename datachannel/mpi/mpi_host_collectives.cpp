#include "datachannel/mpi/mpi_host_collectives.h"

#include <sched.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "datachannel/check.h"
#include "datachannel/collective_engine.h"
#include "datachannel/collectives/comm.h"
#include "datachannel/collectives/reduce_kernels.h"
#include "datachannel/envelope.h"
#include "datachannel/mpi/mpi_library.h"
#include "datachannel/net/auth.h"
#include "tensor/env_setting.h"

namespace thd::detail::mpi {

namespace {

constexpr const char* kOp = "mpi backend";

// Up to these MPI's own calls (with the agreement) beat thd's over the mpi
// backend; above them thd's are faster (docs/backends.md, "Collectives").
constexpr size_t kDefaultAllReduceBytes = size_t{8} << 10;
constexpr size_t kDefaultBroadcastBytes = size_t{64} << 10;
constexpr size_t kDefaultAllGatherBytes = size_t{64} << 10;       // per rank
constexpr size_t kDefaultAllToAllBytes = size_t{256} << 10;       // per rank
constexpr size_t kDefaultReduceScatterBytes = size_t{4} << 10;    // per rank
// Below this thd's broadcast is the faster: its root's sends complete at once
// (the payload rides in the control message), where MPI's costs the agreement.
constexpr size_t kMinBroadcastBytes = 256;

// How long an agreement is tested without pause, then yielding, before the waiter
// naps between tests (MPI moves a collective only inside MPI calls).
constexpr std::chrono::microseconds kSpin{200};
constexpr std::chrono::milliseconds kYield{10};
constexpr std::chrono::microseconds kNap{100};
// How often the pipe's progress looks at a call this rank gave up on.
constexpr std::chrono::milliseconds kFinisherInterval{1};

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Int8: return MPI_INT8_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Bool:
    case DType::Float16:
    case DType::BFloat16: return MPI_DATATYPE_NULL;
  }
  return MPI_DATATYPE_NULL;
}

// MPI's op with thd's result for this dtype, MPI_OP_NULL where there is none: thd's
// float min/max propagate NaN, which MPI leaves to the implementation.
MPI_Op mpi_op(DType dtype, ReduceOp op) {
  const bool floating = dtype == DType::Float32 || dtype == DType::Float64;
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Avg: return floating ? MPI_SUM : MPI_OP_NULL;  // then divided (finish_reduce)
    case ReduceOp::Prod: return MPI_PROD;
    case ReduceOp::Min: return floating ? MPI_OP_NULL : MPI_MIN;
    case ReduceOp::Max: return floating ? MPI_OP_NULL : MPI_MAX;
    case ReduceOp::BAnd: return floating ? MPI_OP_NULL : MPI_BAND;
    case ReduceOp::BOr: return floating ? MPI_OP_NULL : MPI_BOR;
    case ReduceOp::BXor: return floating ? MPI_OP_NULL : MPI_BXOR;
  }
  return MPI_OP_NULL;
}

// A call's kind in two words, and back.
std::array<uint64_t, 2> encode(const MessageKind& k) {
  return {static_cast<uint64_t>(k.op) | static_cast<uint64_t>(k.dtype) << 8 | static_cast<uint64_t>(k.reduce) << 16 |
              static_cast<uint64_t>(static_cast<uint32_t>(k.root)) << 32,
          k.count};
}
MessageKind decode(uint64_t w0, uint64_t w1) {
  MessageKind k;
  k.op = static_cast<MessageOp>(w0 & 0xff);
  k.dtype = static_cast<uint8_t>((w0 >> 8) & 0xff);
  k.reduce = static_cast<uint8_t>((w0 >> 16) & 0xff);
  k.root = static_cast<int32_t>(static_cast<uint32_t>(w0 >> 32));
  k.count = w1;
  return k;
}
size_t bytes_of(const MessageKind& k) {
  if (k.dtype == kRawBytes) return static_cast<size_t>(k.count);
  if (k.dtype >= kNumDTypes) return 0;
  return static_cast<size_t>(k.count) * element_size(static_cast<DType>(k.dtype));
}

bool overlap(const void* a, const void* b, size_t a_bytes, size_t b_bytes) {
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

}  // namespace

NativeLimits parse_native_limits(std::string_view text) {
  NativeLimits limits{kDefaultAllReduceBytes, kDefaultBroadcastBytes, kDefaultAllGatherBytes, kDefaultAllToAllBytes,
                      kDefaultReduceScatterBytes};
  if (text.empty()) return limits;
  if (text.find('=') == std::string_view::npos) {  // one bound for every collective
    const size_t all = parse_whole_number_text({.name = "THD_MPI_NATIVE_MAX_BYTES", .unit = "bytes"}, text, kOp);
    return {all, all, all, all, all};
  }
  const std::pair<std::string_view, size_t NativeLimits::*> names[] = {
      {"all_reduce", &NativeLimits::all_reduce_bytes},         {"broadcast", &NativeLimits::broadcast_bytes},
      {"all_gather", &NativeLimits::all_gather_bytes},         {"all_to_all", &NativeLimits::all_to_all_bytes},
      {"reduce_scatter", &NativeLimits::reduce_scatter_bytes},
  };
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    THD_CHECK(eq != std::string_view::npos, ValueError, kOp,
              "THD_MPI_NATIVE_MAX_BYTES: '{}' is not collective=bytes (in '{}')", item, text);
    const std::string_view name = item.substr(0, eq);
    const auto* found = std::find_if(std::begin(names), std::end(names), [&](const auto& n) { return n.first == name; });
    THD_CHECK(found != std::end(names), ValueError, kOp,
              "THD_MPI_NATIVE_MAX_BYTES: unknown collective '{}' (known: all_reduce, broadcast, all_gather, "
              "all_to_all, reduce_scatter)",
              name);
    const std::string bound = fmt::format("the {} bound of THD_MPI_NATIVE_MAX_BYTES", name);
    limits.*(found->second) = parse_whole_number_text({.name = bound, .unit = "bytes"}, item.substr(eq + 1), kOp);
  }
  return limits;
}

NativeLimits native_limits() {
  const auto v = net::process_env("THD_MPI_NATIVE_MAX_BYTES");
  return parse_native_limits(v ? std::string_view(*v) : std::string_view{});
}

MpiHostCollectives::MpiHostCollectives(MPI_Comm comm, NativeLimits limits) : comm_(comm), limits_(limits) {
  MPI_Comm_size(comm_, &size_);
  register_before_finalize(this, [this] {
    std::lock_guard lock(mu_);
    finalized_ = true;
  });
}

MpiHostCollectives::~MpiHostCollectives() {
  unregister_before_finalize(this);
  std::lock_guard lock(mu_);
  // A communicator with requests MPI still holds is left to MPI_Finalize.
  if (!finalized_ && !abandoned_ && kept_.empty()) MPI_Comm_free(&comm_);
}

void MpiHostCollectives::check(int code, const Comm& comm, const char* call) const {
  if (code == MPI_SUCCESS) return;
  THD_THROW_AT(ConnectionError, comm.op(), comm.transport().rank(), -1, "{} failed: {}", call, error_text(code));
}

bool MpiHostCollectives::await(Comm& comm, MPI_Request& request) {
  const auto start = net::Clock::now();
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), comm, "MPI_Test");
    if (done) return true;
    const auto now = net::Clock::now();
    if (now >= comm.deadline()) return false;
    // An async collective runs on the collective engine: it pauses rather than spins,
    // so the other collectives of its lane go on meanwhile.
    if (CollectiveEngine::on_task()) {
      CollectiveEngine::pause(now - start < kYield ? std::chrono::microseconds(0) : kNap);
      continue;
    }
    if (now - start < kSpin) continue;
    if (now - start < kYield) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(kNap);
    }
  }
}

bool MpiHostCollectives::agreed(const Call& call) {
  const auto& a = call.agreement;
  // After MPI_BAND, a word and its complement are both intact only if every
  // member's matched this rank's bit for bit.
  return a[2] == ~a[0] && a[3] == ~a[1];
}

void MpiHostCollectives::name_the_mismatch(Comm& comm, const Call& call, size_t nbytes) {
  const Envelope& env = comm.envelope();
  // Every member's descriptor, then this rank's own as the send buffer: one block
  // to keep should the gather never finish.
  const size_t n = 2 * static_cast<size_t>(size_);
  auto all = std::make_shared<std::vector<uint64_t>>(n + 2);
  std::copy(call.descriptor.begin(), call.descriptor.end(), all->begin() + static_cast<std::ptrdiff_t>(n));
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Iallgather(all->data() + n, 2, MPI_UINT64_T, all->data(), 2, MPI_UINT64_T, comm_, &request), comm,
        "MPI_Iallgather");
  if (!await(comm, request)) {
    off_.store(true);
    kept_.push_back(std::move(all));
    THD_THROW_AT(TimeoutError, comm.op(), comm.transport().rank(), -1,
                 "the members disagree on this collective ({} here), and did not say how before its deadline",
                 describe(env.kind));
  }
  for (int r = 0; r < size_; ++r) {
    const auto i = 2 * static_cast<size_t>(r);
    const MessageKind theirs = decode((*all)[i], (*all)[i + 1]);
    if (theirs == env.kind) continue;
    Envelope got = env;
    got.kind = theirs;
    std::rethrow_exception(message_mismatch(comm.transport().rank(), comm.world_ranks()[static_cast<size_t>(r)], env,
                                            nbytes, got, bytes_of(theirs)));
  }
  THD_THROW_AT(ValueError, comm.op(), comm.transport().rank(), -1,
               "the members disagreed on this collective, yet every call gathered matches this rank's ({})",
               describe(env.kind));
}

bool MpiHostCollectives::takes(const Comm& comm, size_t nbytes, size_t limit) const {
  const Envelope& env = comm.envelope();
  // The world group (id 0) and tag 0 (a collective's tag is the user's << 32 | its sequence).
  return nbytes <= limit && nbytes <= INT_MAX && env.context == collective_context(0) && (env.tag >> 32) == 0 &&
         !off_.load(std::memory_order_acquire);
}

bool MpiHostCollectives::all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op) {
  const size_t nbytes = count * element_size(dtype);
  if (!takes(comm, nbytes, limits_.all_reduce_bytes)) return false;
  const MPI_Datatype type = mpi_type(dtype);
  const MPI_Op mop = mpi_op(dtype, op);
  if (type == MPI_DATATYPE_NULL || mop == MPI_OP_NULL) return false;
  Call call{.kind = Kind::AllReduce, .count = static_cast<int>(count), .type = type, .op = mop};
  if (!run(comm, call, data, nbytes, data, nbytes)) return false;
  if (op == ReduceOp::Avg) finish_reduce(data, count, dtype, op, size_);
  return true;
}

bool MpiHostCollectives::broadcast(Comm& comm, void* data, size_t nbytes, int root) {
  if (nbytes < kMinBroadcastBytes || !takes(comm, nbytes, limits_.broadcast_bytes)) return false;
  // The world group's ranks are MPI's.
  Call call{.kind = Kind::Broadcast, .count = static_cast<int>(nbytes), .root = root};
  return run(comm, call, data, nbytes, data, nbytes);
}

bool MpiHostCollectives::all_gather(Comm& comm, const void* in, void* out, size_t nbytes_per_rank) {
  if (!takes(comm, nbytes_per_rank, limits_.all_gather_bytes)) return false;
  const size_t out_bytes = nbytes_per_rank * static_cast<size_t>(comm.size());
  // MPI's send buffer may not overlap its receive buffer (but as MPI_IN_PLACE,
  // which every member would have to use): an input already in the output is
  // sent from a copy.
  std::vector<uint8_t> copy;
  if (overlap(in, out, nbytes_per_rank, out_bytes)) {
    const auto* src = static_cast<const uint8_t*>(in);
    copy.assign(src, src + nbytes_per_rank);
    in = copy.data();
  }
  Call call{.kind = Kind::AllGather, .count = static_cast<int>(nbytes_per_rank)};
  return run(comm, call, in, nbytes_per_rank, out, out_bytes);
}

bool MpiHostCollectives::all_to_all(Comm& comm, const void* in, void* out, size_t nbytes_per_rank) {
  if (!takes(comm, nbytes_per_rank, limits_.all_to_all_bytes)) return false;
  const size_t bytes = nbytes_per_rank * static_cast<size_t>(comm.size());
  if (overlap(in, out, bytes, bytes)) return false;  // MPI's buffers may not overlap
  Call call{.kind = Kind::AllToAll, .count = static_cast<int>(nbytes_per_rank)};
  return run(comm, call, in, bytes, out, bytes);
}

bool MpiHostCollectives::reduce_scatter(Comm& comm, const void* in, void* out, size_t count_per_rank, DType dtype,
                                        ReduceOp op) {
  const size_t nbytes = count_per_rank * element_size(dtype);
  if (!takes(comm, nbytes, limits_.reduce_scatter_bytes)) return false;
  const MPI_Datatype type = mpi_type(dtype);
  const MPI_Op mop = mpi_op(dtype, op);
  const size_t in_bytes = nbytes * static_cast<size_t>(comm.size());
  if (type == MPI_DATATYPE_NULL || mop == MPI_OP_NULL || overlap(in, out, in_bytes, nbytes)) return false;
  Call call{.kind = Kind::ReduceScatter, .count = static_cast<int>(count_per_rank), .type = type, .op = mop};
  if (!run(comm, call, in, in_bytes, out, nbytes)) return false;
  if (op == ReduceOp::Avg) finish_reduce(out, count_per_rank, dtype, op, size_);
  return true;
}

bool MpiHostCollectives::barrier(Comm& comm) {
  if (!takes(comm, 0, 0)) return false;
  Call call{.kind = Kind::Barrier};
  return run(comm, call, nullptr, 0, nullptr, 0);
}

bool MpiHostCollectives::run(Comm& comm, const Call& how, const void* in, size_t in_bytes, void* out,
                             size_t out_bytes) {
  std::lock_guard lock(mu_);
  if (finalized_ || off_.load() || size_ != comm.size()) return false;
  auto call = std::make_unique<Call>(how);
  const Envelope& env = comm.envelope();
  call->descriptor = encode(env.kind);
  const auto& mine = call->descriptor;
  call->agreement = {mine[0], mine[1], ~mine[0], ~mine[1]};
  check(MPI_Iallreduce(MPI_IN_PLACE, call->agreement.data(), 4, MPI_UINT64_T, MPI_BAND, comm_, &call->request), comm,
        "MPI_Iallreduce");
  if (!await(comm, call->request)) {
    // Kept with a copy of the input: should the others come, the call is finished
    // after this one has returned (finish_abandoned), and the caller's memory is
    // not touched then.
    const bool one_buffer = call->kind == Kind::AllReduce || call->kind == Kind::Broadcast;
    call->stage_out = one_buffer ? 0 : (in_bytes + 7) / 8;
    call->stage.resize(call->stage_out + (out_bytes + 7) / 8);
    if (in_bytes > 0) std::memcpy(call->stage.data(), in, in_bytes);
    off_.store(true);
    abandoned_ = std::move(call);
    has_abandoned_.store(true, std::memory_order_release);
    THD_THROW_AT(TimeoutError, comm.op(), comm.transport().rank(), -1,
                 "{} did not finish before the collective's deadline: some rank never called it (is it running a "
                 "different collective, or stuck?). MPI cannot withdraw a collective, so this channel runs its "
                 "collectives with thd's own algorithms from now on",
                 describe(env.kind));
  }
  if (!agreed(*call)) name_the_mismatch(comm, *call, in_bytes);
  // Every member is in this call with this size: the data moves in one blocking call.
  check(move_data(*call, in, out), comm, mpi_call_name(call->kind));
  return true;
}

const char* MpiHostCollectives::mpi_call_name(Kind kind) {
  switch (kind) {
    case Kind::AllReduce: return "MPI_Allreduce";
    case Kind::Broadcast: return "MPI_Bcast";
    case Kind::AllGather: return "MPI_Allgather";
    case Kind::AllToAll: return "MPI_Alltoall";
    case Kind::ReduceScatter: return "MPI_Reduce_scatter_block";
    case Kind::Barrier: return "MPI_Iallreduce";
  }
  return "MPI";
}

int MpiHostCollectives::move_data(const Call& call, const void* in, void* out) {
  switch (call.kind) {
    case Kind::AllReduce: return MPI_Allreduce(MPI_IN_PLACE, out, call.count, call.type, call.op, comm_);
    case Kind::Broadcast: return MPI_Bcast(out, call.count, MPI_BYTE, call.root, comm_);
    case Kind::AllGather: return MPI_Allgather(in, call.count, MPI_BYTE, out, call.count, MPI_BYTE, comm_);
    case Kind::AllToAll: return MPI_Alltoall(in, call.count, MPI_BYTE, out, call.count, MPI_BYTE, comm_);
    case Kind::ReduceScatter: return MPI_Reduce_scatter_block(in, out, call.count, call.type, call.op, comm_);
    case Kind::Barrier: return MPI_SUCCESS;  // the agreement was the barrier
  }
  return MPI_ERR_OTHER;
}

void MpiHostCollectives::finish_abandoned() {
  if (!has_abandoned_.load(std::memory_order_acquire)) return;
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || finalized_ || !abandoned_) return;
  // Waiters call progress in tight loops; a call that may never complete (a rank
  // that died or went elsewhere) is looked at once a millisecond.
  const auto now = net::Clock::now();
  if (now < next_look_) return;
  next_look_ = now + kFinisherInterval;
  Call& call = *abandoned_;
  int done = 0;
  if (MPI_Test(&call.request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
    kept_.push_back(std::shared_ptr<const Call>(std::move(abandoned_)));
    has_abandoned_.store(false);
    return;
  }
  if (!done) return;
  // The others were only late: they are in the data's MPI call now, or, when
  // they disagreed, in the gather that names the difference. Join them.
  if (agreed(call)) {
    (void)move_data(call, call.stage.data(), call.stage.data() + call.stage_out);
  } else {
    std::vector<uint64_t> all(2 * static_cast<size_t>(size_));
    MPI_Request gather = MPI_REQUEST_NULL;
    if (MPI_Iallgather(call.descriptor.data(), 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, comm_, &gather) ==
        MPI_SUCCESS) {
      MPI_Wait(&gather, MPI_STATUS_IGNORE);
    }
  }
  abandoned_.reset();
  has_abandoned_.store(false);
}

}  // namespace thd::detail::mpi
