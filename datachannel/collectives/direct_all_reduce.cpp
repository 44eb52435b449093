// All-reduce with a word beside each member's data (runtime_queries.h), in two
// forms. Direct: every member sends [word | data] to every other one and reduces
// what it received on its own: one message latency instead of recursive
// doubling's rounds, for (n - 1) messages per member instead of about log2(n), the
// better trade for the small buffers and small groups it is used for. Rooted:
// every member sends [word | data] to rank 0, which reduces and answers with
// [every word | result]: two latencies, but 2 (n - 1) messages in all instead of
// n (n - 1), for hosts where each message is CPU that the members' work waits for.
//
// The reduction combines the buffers in the very order recursive doubling does
// (recursive_doubling_all_reduce.cpp): the extra ranks of a group that is not a
// power of two fold into their odd neighbours (lower rank first), then a balanced
// binary tree over the power-of-two participants, lower operand first at every
// node. Floating-point sums depend on that order; following it makes the result
// the same bits as the DataChannel's all_reduce of the same buffers, in either form.
#include <bit>
#include <cstring>
#include <vector>

#include "datachannel/check.h"
#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/blocks.h"
#include "datachannel/collectives/reduce_kernels.h"

namespace thd::detail {

namespace {

// Frames of [word | data], one per rank, in one scratch buffer.
class Frames {
 public:
  Frames(int n, size_t nbytes) : nbytes_(nbytes), frame_(sizeof(int64_t) + nbytes) {
    scratch_ = scratch_bytes(frame_ * static_cast<size_t>(n));
    base_ = bytes_of(scratch_);
  }
  uint8_t* frame(int rank) const { return base_ + frame_ * static_cast<size_t>(rank); }
  void* data(int rank) const { return frame(rank) + sizeof(int64_t); }
  size_t frame_bytes() const { return frame_; }
  void put(int rank, int64_t word, const void* data) const {
    std::memcpy(frame(rank), &word, sizeof word);
    if (nbytes_ != 0) std::memcpy(this->data(rank), data, nbytes_);
  }
  int64_t word(int rank) const {
    int64_t w;
    std::memcpy(&w, frame(rank), sizeof w);
    return w;
  }

 private:
  size_t nbytes_, frame_;
  Tensor scratch_;
  uint8_t* base_ = nullptr;
};

// Reduces every rank's data in recursive doubling's order into `out` (which may be
// any rank's data or another buffer), finished as all_reduce finishes (averages).
// The ranks' data is overwritten.
void reduce_in_doubling_order(const Frames& frames, int n, void* out, size_t count, DType dtype, ReduceOp op) {
  const int pof2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int extra = n - pof2;
  // The value each power-of-two participant starts the doubling rounds with.
  std::vector<void*> value(static_cast<size_t>(pof2));
  for (int d = 0; d < pof2; ++d) {
    if (d < extra) {
      reduce_into(frames.data(2 * d + 1), frames.data(2 * d), frames.data(2 * d + 1), count, dtype, op);
      value[static_cast<size_t>(d)] = frames.data(2 * d + 1);
    } else {
      value[static_cast<size_t>(d)] = frames.data(d + extra);
    }
  }
  for (int step = 1; step < pof2; step <<= 1) {
    for (int d = 0; d + step < pof2; d += 2 * step) {
      void* low = value[static_cast<size_t>(d)];
      reduce_into(low, low, value[static_cast<size_t>(d + step)], count, dtype, op);
    }
  }
  std::memcpy(out, value[0], count * element_size(dtype));
  finish_reduce(out, count, dtype, op, n);
}

}  // namespace

void flagged_direct_all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int64_t word,
                               int64_t* words) {
  const int n = comm.size();
  const int r = comm.rank();
  const size_t nbytes = count * element_size(dtype);
  const Frames frames(n, nbytes);
  frames.put(r, word, data);

  std::vector<Request> requests;
  requests.reserve(2 * static_cast<size_t>(n - 1));
  for (int p = 0; p < n; ++p) {
    if (p != r) requests.push_back(comm.irecv(span_of(frames.frame(p), frames.frame_bytes()), p));
  }
  for (int p = 0; p < n; ++p) {
    if (p != r) {
      requests.push_back(comm.isend(span_of(static_cast<const void*>(frames.frame(r)), frames.frame_bytes()), p));
    }
  }
  comm.wait_all(requests);

  bool any = false;
  for (int p = 0; p < n; ++p) {
    words[p] = frames.word(p);
    any = any || words[p] != 0;
  }
  if (any || nbytes == 0) return;  // a member cannot take part: the data stays as it was
  reduce_in_doubling_order(frames, n, data, count, dtype, op);
}

void flagged_rooted_all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int64_t word,
                               int64_t* words) {
  const int n = comm.size();
  const int r = comm.rank();
  const size_t nbytes = count * element_size(dtype);
  // The answer: [status | every word | result]. status: 0, or 1 + the group rank of
  // a member the root could not hear from. The others wait only for the root, so it
  // tells them at once (a failure they would otherwise notice only through the
  // group's liveness checks, a slice later, in every collective of a run of them).
  const size_t head_bytes = sizeof(int64_t) * static_cast<size_t>(n + 1);
  Tensor answer_scratch = scratch_bytes(head_bytes + nbytes);
  uint8_t* answer = bytes_of(answer_scratch);
  auto answer_span = [&] { return span_of(static_cast<void*>(answer), head_bytes + nbytes); };
  auto answer_words = [&] { return answer + sizeof(int64_t); };
  bool any = false;
  if (r != 0) {
    const Frames mine(1, nbytes);
    mine.put(0, word, data);
    std::vector<Request> requests;
    requests.push_back(comm.irecv(answer_span(), 0));
    requests.push_back(comm.isend(span_of(static_cast<const void*>(mine.frame(0)), mine.frame_bytes()), 0));
    comm.wait_all(requests);
    int64_t status;
    std::memcpy(&status, answer, sizeof status);
    if (status != 0) {
      const int lost = static_cast<int>(status - 1);
      THD_THROW_AT(PeerLost, comm.op(), comm.transport().rank(), lost >= 0 && lost < n ? comm.world_ranks()[lost] : -1,
                   "rank {} of the group could not be heard from by the root (rank 0), so the collective cannot "
                   "finish",
                   lost);
    }
    std::memcpy(words, answer_words(), sizeof(int64_t) * static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) any = any || words[p] != 0;
  } else {
    const Frames frames(n, nbytes);
    frames.put(0, word, data);
    std::vector<Request> requests;
    requests.reserve(static_cast<size_t>(n - 1));
    for (int p = 1; p < n; ++p) requests.push_back(comm.irecv(span_of(frames.frame(p), frames.frame_bytes()), p));
    int64_t status = 0;
    std::exception_ptr failure;
    try {
      comm.wait_all(requests);
    } catch (const Error&) {
      failure = std::current_exception();
      status = n;  // a member the root cannot name
      // The member the transport lost (the failure withdrew the other receives,
      // which read as failed too).
      for (int p = 1; p < n; ++p) {
        if (comm.transport().peer_error(comm.world_ranks()[static_cast<size_t>(p)])) {
          status = p + 1;
          break;
        }
      }
    }
    std::memcpy(answer, &status, sizeof status);
    if (!failure) {
      for (int p = 0; p < n; ++p) {
        words[p] = frames.word(p);
        any = any || words[p] != 0;
      }
      std::memcpy(answer_words(), words, sizeof(int64_t) * static_cast<size_t>(n));
      // A member that cannot take part leaves everyone's data as it was; the answer
      // then carries this rank's own bytes, which nobody reads.
      if (nbytes != 0) {
        if (any) {
          std::memcpy(answer + head_bytes, data, nbytes);
        } else {
          reduce_in_doubling_order(frames, n, answer + head_bytes, count, dtype, op);
        }
      }
    } else {
      std::memset(answer + sizeof(int64_t), 0, head_bytes + nbytes - sizeof(int64_t));
    }
    requests.clear();
    for (int p = 1; p < n; ++p) {
      // After a failure, only to the members still there.
      if (failure && comm.transport().peer_error(comm.world_ranks()[static_cast<size_t>(p)])) continue;
      requests.push_back(comm.isend(span_of(static_cast<const void*>(answer), head_bytes + nbytes), p));
    }
    if (failure) {
      try {
        comm.wait_all(requests);
      } catch (const Error&) {  // best effort: the error to report is the first one
      }
      std::rethrow_exception(failure);
    }
    comm.wait_all(requests);
  }
  if (!any && nbytes != 0) std::memcpy(data, answer + head_bytes, nbytes);
}

}  // namespace thd::detail
