// The mpi backend's host collectives (host_collectives.h): on the world group,
// all_reduces, broadcasts, all_gathers, all_to_alls and reduce_scatters up to
// the sizes where MPI's own beat thd's algorithms over point-to-point on one host
// (NativeLimits; docs/backends.md, "Collectives"), and barriers (the agreement
// below being one), run as MPI's; larger ones stay with thd's, which are faster
// there.
//
// What MPI does not give, and thd promises, is kept:
// - Mismatched calls are an error naming both, not undefined behaviour: the
//   members first agree on a descriptor of the call (a 32-byte MPI_Iallreduce with
//   MPI_BAND over the descriptor and its complement, so every member sees any
//   difference), and only on disagreement gather them to name the other call.
//   The agreement is also what a barrier needs: a barrier is the agreement alone.
// - Deadlines: the agreement is nonblocking and tested until the call's deadline.
//   Once it completes every member has entered the call with the same size, and
//   the data moves in one blocking MPI call (Open MPI's nonblocking ones are no
//   faster than thd's own). An MPI collective cannot be withdrawn: a member whose
//   agreement times out keeps it, with a copy of the data, and should it complete
//   later (the others were only late), the pipe's progress finishes the call with
//   that copy, so the others are not left blocked. That member's later calls use
//   thd's algorithms: its sequence on the communicator is no longer the others'.
// - One form on every member: MPI wants MPI_IN_PLACE on all members or none, so
//   all_reduce is always in place and the others never are (an all_gather whose
//   input is already in its output sends from a copy).
// - Concurrency: only tag 0 of the world group is taken (one queue runs it in issue
//   order on every member); other tags and groups are independent sequences that
//   would need a communicator each.
// - Results: only dtypes and ops whose MPI result is thd's exactly (no float
//   min/max, whose NaN handling MPI leaves open; no float16, bfloat16 or bool:
//   16-bit sums, products and averages are offered here already widened to
//   float32, collectives/float32_accumulation.h).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include <mpi.h>

#include "datachannel/host_collectives.h"

namespace thd::detail::mpi {

// The largest calls MPI takes, the same on every rank.
struct NativeLimits {
  size_t all_reduce_bytes = 0;
  size_t broadcast_bytes = 0;
  size_t all_gather_bytes = 0;      // per rank
  size_t all_to_all_bytes = 0;      // per rank
  size_t reduce_scatter_bytes = 0;  // per rank
  // Whether MPI takes anything (barriers only when something else too).
  bool any() const {
    return all_reduce_bytes > 0 || broadcast_bytes > 0 || all_gather_bytes > 0 || all_to_all_bytes > 0 ||
           reduce_scatter_bytes > 0;
  }
};

class MpiHostCollectives final : public HostCollectives {
 public:
  // Takes `comm`, a communicator of the whole world of its own (MPI_Comm_dup).
  MpiHostCollectives(MPI_Comm comm, NativeLimits limits);
  ~MpiHostCollectives() override;
  MpiHostCollectives(const MpiHostCollectives&) = delete;
  MpiHostCollectives& operator=(const MpiHostCollectives&) = delete;

  bool all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op) override;
  bool broadcast(Comm& comm, void* data, size_t nbytes, int root) override;
  bool all_gather(Comm& comm, const void* in, void* out, size_t nbytes_per_rank) override;
  bool all_to_all(Comm& comm, const void* in, void* out, size_t nbytes_per_rank) override;
  bool reduce_scatter(Comm& comm, const void* in, void* out, size_t count_per_rank, DType dtype,
                      ReduceOp op) override;
  bool barrier(Comm& comm) override;

  // Finishes a call this rank gave up on whose agreement completed since (see
  // above); cheap when there is none. The pipe calls it from progress().
  void finish_abandoned();

 private:
  enum class Kind : uint8_t { AllReduce, Broadcast, AllGather, AllToAll, ReduceScatter, Barrier };
  // One call: the agreement's words, then how its data moves.
  struct Call {
    Kind kind = Kind::Barrier;
    std::array<uint64_t, 2> descriptor{};  // this rank's call (encode())
    std::array<uint64_t, 4> agreement{};   // descriptor and complement, then every member's ANDed
    MPI_Request request = MPI_REQUEST_NULL;  // the agreement's
    int count = 0;  // elements (all_reduce; reduce_scatter, per rank), bytes (the others; per rank)
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_Op op = MPI_OP_NULL;
    int root = 0;
    // A call given up on: a copy of its input, then (but for all_reduce and
    // broadcast, which work in one buffer) room for its output, starting at word
    // `stage_out`; in 8-byte words (every dtype fits).
    std::vector<uint64_t> stage{};
    size_t stage_out = 0;
  };
  // Whether this call is MPI's: the world group's tag 0, within `limit` bytes.
  bool takes(const Comm& comm, size_t nbytes, size_t limit) const;
  // Agrees on the call `how` and moves its data from `in` (in_bytes) into `out`
  // (out_bytes; the same buffer for all_reduce and broadcast): false when this
  // channel no longer takes calls (MPI finalizing, a call given up on). Throws
  // as HostCollectives says.
  bool run(Comm& comm, const Call& how, const void* in, size_t in_bytes, void* out, size_t out_bytes);
  // The call's data step, once agreed.
  int move_data(const Call& call, const void* in, void* out);
  static const char* mpi_call_name(Kind kind);
  // Tests `request` until it completes (true) or comm's deadline passes (false).
  bool await(Comm& comm, MPI_Request& request);
  static bool agreed(const Call& call);
  [[noreturn]] void name_the_mismatch(Comm& comm, const Call& call, size_t nbytes);
  void check(int code, const Comm& comm, const char* call) const;

  std::mutex mu_;  // one call at a time, and the finisher
  MPI_Comm comm_;
  int size_ = 0;
  const NativeLimits limits_;
  bool finalized_ = false;             // MPI_Finalize is coming: no more MPI calls
  std::atomic<bool> off_{false};       // a call timed out here: thd's algorithms from now on
  std::atomic<bool> has_abandoned_{false};
  std::unique_ptr<Call> abandoned_;    // its agreement still pending in MPI
  std::chrono::steady_clock::time_point next_look_{};
  // What collectives that will never finish may still write into: a collective's
  // request cannot be freed, so its memory is kept for the channel's life.
  std::vector<std::shared_ptr<const void>> kept_;
};

// The largest calls the mpi backend hands to MPI: the measured crossovers, with
// THD_MPI_NATIVE_MAX_BYTES applied (all 0 turns MPI's own collectives off,
// barriers too).
// THD_MPI_NATIVE_MAX_BYTES: one number of bytes bounds every collective; a list
// "all_reduce=16384,broadcast=0" sets the ones it names (0: never MPI's), the
// others keep their defaults. ValueError naming the variable for anything else.
NativeLimits parse_native_limits(std::string_view text);
NativeLimits native_limits();

}  // namespace thd::detail::mpi
