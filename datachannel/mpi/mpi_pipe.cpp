#include "datachannel/mpi/mpi_pipe.h"

#include <algorithm>
#include <array>
#include <climits>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <mpi.h>

#include "datachannel/check.h"
#include "datachannel/mpi/mpi_host_collectives.h"
#include "datachannel/mpi/mpi_library.h"
#include "datachannel/mpi/mpi_wait.h"

namespace thd::detail::mpi {

namespace {

constexpr const char* kOp = "mpi backend";
// MPI counts are ints: larger messages go as several messages of this size on the
// same tag, which MPI keeps in order.
constexpr size_t kChunkBytes = size_t{1} << 30;

int chunks_of(size_t bytes) { return bytes == 0 ? 1 : static_cast<int>((bytes + kChunkBytes - 1) / kChunkBytes); }

std::exception_ptr failure(int rank, int peer, std::string_view what, int code) {
  try {
    if (code == MPI_ERR_TRUNCATE) {
      THD_THROW_AT(ValueError, kOp, rank, peer, "{} from rank {}: the message is longer than the receive ({})", what,
                   peer, error_text(code));
    }
    THD_THROW_AT(ConnectionError, kOp, rank, peer, "{} with rank {} failed: {}", what, peer, error_text(code));
  } catch (...) {
    return std::current_exception();
  }
}

class MpiPipe final : public pipe::MessagePipe {
 public:
  // vader's single-copy get writes a large message's whole length, however short
  // the receive (MessagePipe::truncates_safely).
  bool truncates_safely() const noexcept override { return false; }
  MpiPipe(int rank, int size, MPI_Comm comm, uint32_t max_tag, std::unique_ptr<MpiHostCollectives> collectives)
      : MessagePipe(rank, size), comm_(comm), max_tag_(max_tag), collectives_(std::move(collectives)) {
    register_before_finalize(this, [this] {
      std::lock_guard lock(mpi_mu_);
      finalized_ = true;
    });
  }

  ~MpiPipe() override {
    unregister_before_finalize(this);
    std::lock_guard lock(mpi_mu_);
    if (finalized_) return;  // MPI is gone, and its requests with it
    for (size_t i = 0; i < requests_.size(); ++i) {
      if (requests_[i] == MPI_REQUEST_NULL) continue;
      if (slots_[i].state->recv) {
        MPI_Cancel(&requests_[i]);
        MPI_Wait(&requests_[i], MPI_STATUS_IGNORE);
      } else {
        MPI_Request_free(&requests_[i]);  // completes on its own; the transport kept its memory
      }
    }
    MPI_Comm_free(&comm_);
  }

  std::string_view name() const noexcept override { return "mpi"; }
  HostCollectives* host_collectives() noexcept override { return collectives_.get(); }
  uint32_t max_tag() const noexcept override { return max_tag_; }

  void send(int peer, uint32_t tag, std::span<const uint8_t> data, pipe::PipeOp* op) override {
    start(peer, tag, const_cast<uint8_t*>(data.data()), data.size(), op, false);
  }
  void recv(int peer, uint32_t tag, std::span<uint8_t> data, pipe::PipeOp* op) override {
    start(peer, tag, data.data(), data.size(), op, true);
  }

  bool cancel(pipe::PipeOp* op) override {
    std::lock_guard lock(mpi_mu_);
    if (finalized_) return ops_.erase(op) > 0;
    auto it = ops_.find(op);
    if (it == ops_.end() || !it->second->recv) return false;
    OpState& s = *it->second;
    bool all_cancelled = true;
    for (size_t i = 0; i < requests_.size(); ++i) {
      if (slots_[i].state != &s || requests_[i] == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&requests_[i]);
      MPI_Status status;
      MPI_Wait(&requests_[i], &status);
      int cancelled = 0;
      MPI_Test_cancelled(&status, &cancelled);
      if (!cancelled) all_cancelled = false;
    }
    compact();
    if (all_cancelled) {
      ops_.erase(it);
      return true;
    }
    // Matched already: its bytes landed. Report it at the next progress().
    s.outstanding = 0;
    if (!s.error) s.error = failure(rank(), s.peer, "a withdrawn receive", MPI_ERR_PENDING);
    finished_.push_back(op);
    return false;
  }

  int progress() override {
    if (collectives_) collectives_->finish_abandoned();
    std::lock_guard lock(mpi_mu_);
    int completed = deliver_finished();
    if (finalized_) return completed;
    if (requests_.empty()) return completed;
    int outcount = 0;
    indices_.resize(requests_.size());
    statuses_.resize(requests_.size());
    const int rc = MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &outcount, indices_.data(),
                                statuses_.data());
    if (outcount == MPI_UNDEFINED || outcount == 0) return completed;
    for (int k = 0; k < outcount; ++k) {
      const int i = indices_[static_cast<size_t>(k)];
      OpState& s = *slots_[static_cast<size_t>(i)].state;
      const MPI_Status& st = statuses_[static_cast<size_t>(k)];
      const int code = rc == MPI_ERR_IN_STATUS ? st.MPI_ERROR : rc;
      if (code != MPI_SUCCESS && code != MPI_ERR_PENDING && !s.error) {
        s.error = failure(rank(), s.peer, s.recv ? "a receive" : "a send", code);
      }
      if (s.recv && code == MPI_SUCCESS) {
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        s.bytes += static_cast<size_t>(count);
      }
      if (--s.outstanding == 0) finished_.push_back(s.op);
    }
    compact();
    last_activity_ = Clock::now();
    return completed + deliver_finished();
  }

  bool arm() override { return true; }

  void sleep(net::Deadline until, bool busy) override {
    // MPI moves data only inside MPI calls, so a transfer in flight is polled
    // without a pause; an idle pipe naps longer the longer it has been idle.
    std::unique_lock lock(sleep_mu_);
    if (interrupted_) {
      interrupted_ = false;
      return;
    }
    const auto idle = Clock::now() - last_activity_;
    std::chrono::microseconds nap{0};
    if (!busy && idle > std::chrono::microseconds(200)) {
      nap = std::clamp(std::chrono::duration_cast<std::chrono::microseconds>(idle / 8), std::chrono::microseconds(20),
                       std::chrono::microseconds(1000));
    }
    if (nap.count() == 0) {
      lock.unlock();
      std::this_thread::yield();
      return;
    }
    sleep_cv_.wait_until(lock, std::min(until, net::Clock::now() + nap), [&] { return interrupted_; });
    interrupted_ = false;
  }

  void interrupt() noexcept override {
    {
      std::lock_guard lock(sleep_mu_);
      interrupted_ = true;
    }
    sleep_cv_.notify_one();
  }

  std::exception_ptr peer_error(int) const override { return nullptr; }  // MPI ends the job instead

 private:
  using Clock = std::chrono::steady_clock;
  struct OpState {
    pipe::PipeOp* op = nullptr;
    int peer = -1;
    bool recv = false;
    int outstanding = 0;
    size_t bytes = 0;
    std::exception_ptr error;
  };
  struct Slot {
    OpState* state;
  };

  void start(int peer, uint32_t tag, uint8_t* data, size_t bytes, pipe::PipeOp* op, bool recv) {
    std::lock_guard lock(mpi_mu_);
    auto owned = std::make_unique<OpState>();
    OpState& s = *owned;
    s.op = op;
    s.peer = peer;
    s.recv = recv;
    s.bytes = recv ? 0 : bytes;
    ops_.emplace(op, std::move(owned));
    if (finalized_) {
      s.error = std::make_exception_ptr(
          ConnectionError("MPI was finalized (the process is exiting)", context_at(kOp, rank(), peer, __FILE__, __LINE__)));
      finished_.push_back(op);
      return;
    }
    const int chunks = chunks_of(bytes);
    for (int c = 0; c < chunks; ++c) {
      const size_t offset = static_cast<size_t>(c) * kChunkBytes;
      const int count = static_cast<int>(std::min(kChunkBytes, bytes - std::min(bytes, offset)));
      MPI_Request request = MPI_REQUEST_NULL;
      const int rc = recv ? MPI_Irecv(data + offset, count, MPI_BYTE, peer, static_cast<int>(tag), comm_, &request)
                          : MPI_Isend(data + offset, count, MPI_BYTE, peer, static_cast<int>(tag), comm_, &request);
      if (rc != MPI_SUCCESS) {
        if (!s.error) s.error = failure(rank(), peer, recv ? "posting a receive" : "posting a send", rc);
        continue;
      }
      ++s.outstanding;
      requests_.push_back(request);
      slots_.push_back({&s});
    }
    if (s.outstanding == 0) finished_.push_back(op);
  }

  // Calls done() for finished ops; the transport defers its handling, so done()
  // never re-enters this pipe.
  int deliver_finished() {
    int n = 0;
    while (!finished_.empty()) {
      pipe::PipeOp* op = finished_.back();
      finished_.pop_back();
      auto it = ops_.find(op);
      if (it == ops_.end()) continue;
      std::unique_ptr<OpState> s = std::move(it->second);
      ops_.erase(it);
      op->done(s->error, s->bytes);
      ++n;
    }
    return n;
  }

  void compact() {
    size_t out = 0;
    for (size_t i = 0; i < requests_.size(); ++i) {
      if (requests_[i] == MPI_REQUEST_NULL) continue;
      requests_[out] = requests_[i];
      slots_[out] = slots_[i];
      ++out;
    }
    requests_.resize(out);
    slots_.resize(out);
  }

  // Held around every MPI call: thd's MPI_Finalize at exit waits for the call in
  // flight and then finds finalized_ set (register_before_finalize).
  std::mutex mpi_mu_;
  bool finalized_ = false;
  MPI_Comm comm_;
  const uint32_t max_tag_;
  std::unique_ptr<MpiHostCollectives> collectives_;  // null when turned off
  std::unordered_map<pipe::PipeOp*, std::unique_ptr<OpState>> ops_;
  std::vector<MPI_Request> requests_;  // parallel to slots_, for MPI_Testsome
  std::vector<Slot> slots_;
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
  std::vector<pipe::PipeOp*> finished_;
  Clock::time_point last_activity_ = Clock::now();

  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
  bool interrupted_ = false;
};

}  // namespace

std::unique_ptr<pipe::MessagePipe> make_pipe(const DataChannelOptions& options) {
  THD_CHECK(options.store != nullptr, ValueError, kOp,
            "DataChannelOptions::store is required: groups agree on their ids through it");
  THD_CHECK(options.timeout.count() > 0, ValueError, kOp, "timeout must be positive, got {} ms",
            options.timeout.count());
  ensure_initialized(kOp);
  // Read before any collective call: a malformed value throws on this rank alone.
  const NativeLimits asked = native_limits();
  int rank = -1;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  THD_CHECK(options.rank == rank && options.world_size == size, ValueError, kOp,
            "the mpi backend's ranks are MPI's: this process is MPI rank {} of {}, but it was asked to be rank {} of "
            "{} (launch with mpirun/srun and take rank and world size from MPI, e.g. init_method mpi://)",
            rank, size, options.rank, options.world_size);
  void* attr = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &found);
  const int tag_ub = found && attr ? *static_cast<int*>(attr) : 32767;
  // Collective over the world: every rank creates its channel together, as with
  // tcp, within the channel's timeout (a rank that never comes fails the others'
  // set-up with a TimeoutError, not a hang).
  const net::Deadline deadline = net::deadline_after(options.timeout);
  auto dup = [&] {
    auto comm = std::make_shared<MPI_Comm>(MPI_COMM_NULL);
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Comm_idup(MPI_COMM_WORLD, comm.get(), &request), kOp, "MPI_Comm_idup");
    wait_within(request, deadline, options.timeout, kOp, "MPI_Comm_idup", comm);
    MPI_Comm_set_errhandler(*comm, MPI_ERRORS_RETURN);
    return *comm;
  };
  MPI_Comm comm = dup();
  // MPI's own collectives run on a communicator of their own, so their sequence
  // never meets the pipe's messages. The ranks agree on the largest sizes MPI
  // takes (the smallest any asks for), so a call is MPI's on every member or on
  // none.
  MPI_Comm native = dup();
  auto limits = std::make_shared<std::array<unsigned long long, 5>>(std::array<unsigned long long, 5>{
      asked.all_reduce_bytes, asked.broadcast_bytes, asked.all_gather_bytes, asked.all_to_all_bytes,
      asked.reduce_scatter_bytes});
  MPI_Request agreeing = MPI_REQUEST_NULL;
  check(MPI_Iallreduce(MPI_IN_PLACE, limits->data(), 5, MPI_UNSIGNED_LONG_LONG, MPI_MIN, native, &agreeing), kOp,
        "MPI_Iallreduce");
  wait_within(agreeing, deadline, options.timeout, kOp, "MPI_Iallreduce", limits);
  const auto& l = *limits;
  const NativeLimits agreed{static_cast<size_t>(l[0]), static_cast<size_t>(l[1]), static_cast<size_t>(l[2]),
                            static_cast<size_t>(l[3]), static_cast<size_t>(l[4])};
  std::unique_ptr<MpiHostCollectives> collectives;
  if (agreed.any()) {
    collectives = std::make_unique<MpiHostCollectives>(native, agreed);
  } else {
    MPI_Comm_free(&native);
  }
  return std::make_unique<MpiPipe>(rank, size, comm, static_cast<uint32_t>(std::max(tag_ub, 2)),
                                   std::move(collectives));
}

}  // namespace thd::detail::mpi
