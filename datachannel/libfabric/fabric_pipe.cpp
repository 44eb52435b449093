#include "datachannel/libfabric/fabric_pipe.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "datachannel/check.h"
#include "datachannel/libfabric/fi_error.h"

namespace thd::detail::libfabric {

namespace {

using std::chrono::microseconds;

// Tries of a post the provider answers with -FI_EAGAIN, reading completions in
// between, before the op waits in the queue for progress().
constexpr int kPostTries = 3;
// How long cancel() waits for the provider to confirm a withdrawn receive (the
// tcp and shm providers do so inside fi_cancel).
constexpr auto kCancelWait = std::chrono::milliseconds(50);
// The destructor's bounds: on letting sends in flight finish, and on all of it
// (sends, goodbyes, withdrawn receives).
constexpr auto kFlushWait = std::chrono::seconds(1);
constexpr auto kCloseWait = std::chrono::seconds(2);
// Naps of a sleep() that cannot block on a file descriptor: while ops wait in the
// queue or a transfer is in flight, and when idle (growing to the maximum).
constexpr int64_t kQueuedNapUs = 50;
constexpr int64_t kBusyNapUs = 50;
constexpr int64_t kMinIdleNapUs = 200;
constexpr int64_t kMaxIdleNapUs = 5000;
// Receives shorter than this land in a buffer of this size owned by the op and
// are copied out: a longer message up to this size then arrives whole and is
// refused with its exact size, and the provider never truncates it (tcp;ofi_rxm
// 1.17 can leave its connection stuck after truncating an eager message, shm 1.17
// hangs truncating one above its inline size). It covers rxm's eager limit and
// PipeTransport's control messages; larger receives are zero-copy.
constexpr size_t kLandingBytes = size_t{16} << 10;
// Completions read per fi_cq_read, and the most read in one go.
constexpr size_t kBatch = 16;
constexpr int kMaxReadsPerCall = 64;
// How long a peek waits for the provider's answer: tcp;ofi_rxm gives it inside
// fi_trecvmsg. The construction's first peek waits less: shm (1.17) takes the
// peek and never answers, and its pipe should not be slow to make for that.
constexpr auto kPeekWait = std::chrono::seconds(1);
constexpr auto kFirstPeekWait = std::chrono::milliseconds(50);

void nap(microseconds us) { std::this_thread::sleep_for(us); }

// shm (1.17) truncating a message above its inject size into a shorter receive
// spins forever inside fi_cq_read (docs/backend_libfabric.md, Limitations).
bool truncation_hangs(std::string_view provider) noexcept { return provider == "shm"; }

}  // namespace

struct FabricPipe::Op {
  enum class Kind : uint8_t { Send, Recv, GoodbyeSend, GoodbyeRecv, Peek };

  // The provider's scratch first: the completion's op_context is &context, which
  // is also &context.fi (FI_CONTEXT needs an fi_context there, FI_CONTEXT2 two).
  struct Context {
    fi_context2 fi;
    Op* self;
  } context{};
  Kind kind;
  int peer;  // -1: a tagged receive from any rank
  uint32_t tag;  // the pipe's tag, or a tagged op's caller's tag (for errors)
  uint8_t* buf;
  size_t len;
  // Where a short receive lands instead of buf (kLandingBytes), else null.
  std::unique_ptr<uint8_t[]> landing;
  pipe::PipeOp* user;
  MemoryRegion mr;
  // Handed to the provider (not waiting in the queue, not yet completed).
  bool posted = false;
  // cancel() withdrew it: an FI_ECANCELED completion is that, not a fault.
  bool cancel_requested = false;
  // Its peer was lost while it was posted: what its completion reports if it
  // does not succeed.
  std::exception_ptr fail_with;
  // A tagged op (send_tagged, recv_tagged): its whole tag and, for a receive, the
  // bits it ignores and where the message's own tag goes.
  bool tagged = false;
  uint64_t fabric_tag = 0;
  uint64_t ignore = 0;
  uint64_t* sender_out = nullptr;
  // A peek's answer, once it came.
  std::optional<PeekResult> peeked;
  Probed peek_found;

  Op(Kind k, int p, uint32_t t, uint8_t* b, size_t n, pipe::PipeOp* u)
      : kind(k), peer(p), tag(t), buf(b), len(n), user(u) {
    context.self = this;
    if (kind == Kind::Recv && len < kLandingBytes) landing = std::make_unique_for_overwrite<uint8_t[]>(kLandingBytes);
  }

  // The memory the provider reads or writes.
  uint8_t* target() const noexcept { return landing ? landing.get() : buf; }
  size_t target_len() const noexcept { return landing ? kLandingBytes : len; }

  std::string what() const {
    switch (kind) {
      case Kind::Send:
        return fmt::format("send of {} bytes to rank {} (tag {})", len, peer, tag);
      case Kind::Recv:
        if (peer < 0) return fmt::format("receive of up to {} bytes from any rank (tag {})", len, tag);
        return fmt::format("receive of up to {} bytes from rank {} (tag {})", len, peer, tag);
      case Kind::GoodbyeSend:
        return fmt::format("goodbye to rank {}", peer);
      case Kind::GoodbyeRecv:
        return "goodbye receive";
      case Kind::Peek:
        return "peek";
    }
    return "op";
  }
};

FabricPipe::FabricPipe(int rank, int size, Endpoint endpoint, std::vector<fi_addr_t> peers, TagLayout tags,
                       RegistrationPolicy registration, std::shared_ptr<Lifeline> lifeline,
                       std::vector<std::shared_ptr<Lifeline>> in_process_peers)
    : MessagePipe(rank, size),
      endpoint_(std::move(endpoint)),
      peers_(std::move(peers)),
      tags_(tags),
      registration_(registration),
      max_msg_size_(endpoint_.info().ep_attr->max_msg_size),
      inject_size_(endpoint_.info().tx_attr->inject_size),
      truncates_safely_(!truncation_hangs(endpoint_.provider())),
      lifeline_(std::move(lifeline)),
      in_process_peers_(std::move(in_process_peers)),
      peer_errors_(static_cast<size_t>(size)),
      departed_(static_cast<size_t>(size), 0),
      idle_nap_us_(kMinIdleNapUs) {
  if (size > 1) {
    goodbye_recv_ = std::make_unique<Op>(Op::Kind::GoodbyeRecv, -1, 0, nullptr, 0, nullptr);
    if (!post_internal(*goodbye_recv_)) {
      THD_THROW_AT(ConnectionError, kOp, rank, -1, "libfabric provider '{}' refused the goodbye receive; {}",
                   provider(), provider_hint(""));
    }
  }
  native_ = NativeLayout::make(tags_);
  if (native_) {
    collective_ = pipe::CollectiveTagLayout::make(tags_.usable(), size);
    // Native matching needs the provider's peek for receives of any length; one
    // that refuses it keeps every message on the control path.
    peek_ = std::make_unique<Op>(Op::Kind::Peek, -1, 0, nullptr, 0, nullptr);
    Probed unused;
    peeks_ = peek(native_->pack({}), 0, &unused, kFirstPeekWait) != PeekResult::Failed;
  }
}

FabricPipe::~FabricPipe() { close(); }

void FabricPipe::check_args(int peer, uint32_t tag, pipe::PipeOp* op, std::string_view what) const {
  THD_CHECK(op != nullptr, ValueError, kOp, "{}: no PipeOp given", what);
  THD_CHECK(!ops_.contains(op), ValueError, kOp, "{}: this PipeOp is already pending", what);
  check_peer_and_tag(peer, tag, what);
}

void FabricPipe::check_peer_and_tag(int peer, uint32_t tag, std::string_view what) const {
  if (peer < 0 || peer >= size() || peer == rank()) {
    THD_THROW_AT(ValueError, kOp, rank(), peer, "{}: peer {} is not another rank of this world of {}", what, peer,
                 size());
  }
  if (tag > tags_.max_tag()) {
    THD_THROW_AT(ValueError, kOp, rank(), peer, "{}: tag {} is above the pipe's max_tag {}", what, tag,
                 tags_.max_tag());
  }
}

void FabricPipe::check_native(int peer, pipe::PipeOp* op, bool any_allowed, std::string_view what) const {
  THD_CHECK(op != nullptr, ValueError, kOp, "{}: no PipeOp given", what);
  THD_CHECK(!ops_.contains(op), ValueError, kOp, "{}: this PipeOp is already pending", what);
  THD_CHECK(matches_natively(), ValueError, kOp, "{}: libfabric provider '{}' does not match natively here", what,
            provider());
  if ((peer < 0 || peer >= size()) && !(any_allowed && peer == -1)) {
    THD_THROW_AT(ValueError, kOp, rank(), peer, "{}: peer {} is not a rank of this world of {}", what, peer, size());
  }
}

void FabricPipe::send(int peer, uint32_t tag, std::span<const uint8_t> data, pipe::PipeOp* op) {
  check_args(peer, tag, op, "send");
  // The provider only reads a send's buffer; its API takes a plain pointer.
  start(std::make_unique<Op>(Op::Kind::Send, peer, tag, const_cast<uint8_t*>(data.data()), data.size(), op));
}

bool FabricPipe::send_at_once(int peer, uint32_t tag, std::span<const uint8_t> data) {
  check_peer_and_tag(peer, tag, "send");
  if (data.size() > inject_size_ || peer_errors_[static_cast<size_t>(peer)] || !queue_of(peer).empty()) return false;
  // The provider copies the message before returning and reports no completion
  // (FI_INJECT semantics); -FI_EAGAIN and the rest leave it to send(), which
  // retries and reports.
  if (fi_tinject(endpoint_.ep(), data.data(), data.size(), peers_[static_cast<size_t>(peer)],
                 tags_.data_tag(rank(), tag)) != 0) {
    return false;
  }
  // As start() does: an answer may follow, so a napping sleeper looks again soon.
  idle_nap_us_.store(kMinIdleNapUs, std::memory_order_relaxed);
  return true;
}

void FabricPipe::recv(int peer, uint32_t tag, std::span<uint8_t> data, pipe::PipeOp* op) {
  check_args(peer, tag, op, "recv");
  start(std::make_unique<Op>(Op::Kind::Recv, peer, tag, data.data(), data.size(), op));
}

pipe::MessagePipe::NativeMatch FabricPipe::native_match(const Envelope& envelope, int source) const {
  if (envelope.context % 2 == 1) {
    if (!collective_) return {};
    const pipe::CollectiveTagLayout::Match m = collective_->match(envelope, source);
    return {m.tag, m.mask};
  }
  if (!native_) return {};
  const NativeLayout::Match m = native_->match(envelope, source);
  return {m.tag, m.mask};
}

Envelope FabricPipe::native_envelope(const Envelope& posted, uint64_t tag, size_t bytes) const {
  if (collective_ && collective_->is_collective(tag)) return collective_->arrival(posted, tag);
  return MessagePipe::native_envelope(posted, tag, bytes);
}

pipe::MessagePipe::NativeOrigin FabricPipe::native_origin(uint64_t tag) const {
  if (collective_ && collective_->is_collective(tag)) return {collective_->sender_of(tag), detail::kRawBytes};
  if (!native_) return {};
  const NativeLayout::Fields f = native_->unpack(tag);
  return {f.sender, f.dtype == NativeLayout::kRawBytesCode ? detail::kRawBytes : static_cast<uint8_t>(f.dtype)};
}

void FabricPipe::send_tagged(int peer, uint64_t tag, std::span<const uint8_t> data, pipe::PipeOp* op) {
  check_native(peer, op, false, "send");
  if (peer == rank() && peers_[static_cast<size_t>(peer)] == FI_ADDR_NOTAVAIL) insert_self();
  auto owned = std::make_unique<Op>(Op::Kind::Send, peer, static_cast<uint32_t>(native_->unpack(tag).tag),
                                    const_cast<uint8_t*>(data.data()), data.size(), op);
  owned->tagged = true;
  owned->fabric_tag = tag;
  start(std::move(owned));
}

void FabricPipe::insert_self() {
  // At the first tagged message to this rank, not at set-up: a pipe that matches
  // nothing natively (shm) never holds its own address, which the control path
  // has no use for (PipeTransport delivers self-sends itself).
  const std::vector<uint8_t> name = endpoint_.name();
  fi_addr_t self = FI_ADDR_NOTAVAIL;
  const int inserted = fi_av_insert(endpoint_.av(), name.data(), 1, &self, 0, nullptr);
  if (inserted != 1) {
    THD_THROW_AT(ConnectionError, kOp, rank(), rank(),
                 "libfabric provider '{}' refused this rank's own address (fi_av_insert: {})", provider(),
                 inserted < 0 ? fi_error_text(inserted) : std::string("not inserted"));
  }
  peers_[static_cast<size_t>(rank())] = self;
}

bool FabricPipe::send_tagged_at_once(int peer, uint64_t tag, std::span<const uint8_t> data) {
  if (!matches_natively() || peer < 0 || peer >= size() || peer == rank()) return false;
  if (data.size() > inject_size_ || peer_errors_[static_cast<size_t>(peer)] || !queue_of(peer).empty()) return false;
  if (fi_tinject(endpoint_.ep(), data.data(), data.size(), peers_[static_cast<size_t>(peer)], tag) != 0) return false;
  idle_nap_us_.store(kMinIdleNapUs, std::memory_order_relaxed);
  return true;
}

void FabricPipe::recv_tagged(int peer, uint64_t tag, uint64_t mask, std::span<uint8_t> data, uint64_t* sender_tag,
                             pipe::PipeOp* op) {
  check_native(peer, op, true, "recv");
  auto owned = std::make_unique<Op>(Op::Kind::Recv, peer, static_cast<uint32_t>(native_->unpack(tag).tag),
                                    data.data(), data.size(), op);
  owned->tagged = true;
  owned->fabric_tag = tag;
  owned->ignore = ~mask & usable_mask();
  owned->sender_out = sender_tag;
  start(std::move(owned));
}

std::optional<pipe::MessagePipe::Probed> FabricPipe::probe_tagged(uint64_t tag, uint64_t mask) {
  if (!matches_natively()) return std::nullopt;
  Probed found;
  if (peek(tag, ~mask & usable_mask(), &found, kPeekWait) != PeekResult::Found) return std::nullopt;
  return found;
}

FabricPipe::PeekResult FabricPipe::peek(uint64_t tag, uint64_t ignore, Probed* found,
                                        std::chrono::milliseconds wait) {
  Op& p = *peek_;
  p.peeked.reset();
  fi_msg_tagged msg{};
  msg.addr = FI_ADDR_UNSPEC;
  msg.tag = tag;
  msg.ignore = ignore;
  msg.context = &p.context;
  int rc = 0;
  for (int tries = 1;; ++tries) {
    rc = static_cast<int>(fi_trecvmsg(endpoint_.ep(), &msg, FI_PEEK | FI_COMPLETION));
    if (rc != -FI_EAGAIN || tries == kPostTries) break;
    read_completions();
  }
  if (rc == -FI_EAGAIN) return PeekResult::NoMessage;  // busy: the caller looks again later
  if (rc != 0) return PeekResult::Failed;
  p.posted = true;
  // The answer is a completion: FI_ENOMSG (an error entry) or the message's length and tag.
  const auto deadline = net::Clock::now() + wait;
  for (int rounds = 0; !p.peeked; ++rounds) {
    read_completions();
    if (p.peeked) break;
    if (net::Clock::now() >= deadline) {
      // Withdrawn, lest a provider that took it for a receive match a message
      // with it; it may still answer into this op, which stays until the endpoint closes.
      (void)fi_cancel(&endpoint_.ep()->fid, &p.context);
      unanswered_peeks_.push_back(std::move(peek_));
      peek_ = std::make_unique<Op>(Op::Kind::Peek, -1, 0, nullptr, 0, nullptr);
      return PeekResult::Failed;
    }
    if (rounds > 64) nap(microseconds(5));
  }
  if (*p.peeked == PeekResult::Found) *found = p.peek_found;
  return *p.peeked;
}

void FabricPipe::start(std::unique_ptr<Op> owned) {
  Op& op = *owned;
  pipe::PipeOp* user = op.user;
  static const std::exception_ptr kNone;
  const std::exception_ptr& lost = op.peer >= 0 ? peer_errors_[static_cast<size_t>(op.peer)] : kNone;
  if (lost && op.kind == Op::Kind::Send) {
    user->done(lost, 0);
    return;
  }
  if (op.len > max_msg_size_) {
    user->done(
        std::make_exception_ptr(ValueError(fmt::format("{} is longer than libfabric provider '{}' allows ({} bytes)",
                                                       op.what(), provider(), max_msg_size_),
                                           context_at(kOp, rank(), op.peer, __FILE__, __LINE__))),
        0);
    return;
  }
  const uint64_t access = op.kind == Op::Kind::Send ? FI_SEND : FI_RECV;
  const int reg = op.mr.register_buffer(endpoint_.domain(), endpoint_.ep(), registration_, op.target(), op.target_len(),
                                        access, next_key_++);
  if (reg != 0) {
    user->done(
        std::make_exception_ptr(ConnectionError(
            fmt::format("registering the buffer of a {} with libfabric failed: {}", op.what(), fi_error_text(reg)),
            context_at(kOp, rank(), op.peer, __FILE__, __LINE__))),
        0);
    return;
  }
  ops_.emplace(user, std::move(owned));
  idle_nap_us_.store(kMinIdleNapUs);
  // Behind ops to the same peer already waiting, to keep its messages in order.
  // Per peer: a peer whose connection is stuck (dead) holds up no one else.
  std::deque<Op*>& queue = queue_for(op);
  if (!queue.empty()) {
    queue.push_back(&op);
    return;
  }
  for (int tries = 1;; ++tries) {
    const int rc = post(op);
    if (rc == 0) {
      op.posted = true;
      break;
    }
    if (rc != -FI_EAGAIN) {
      std::exception_ptr error = post_error(op, rc);
      ops_.erase(user);
      user->done(error, 0);
      return;
    }
    if (tries == kPostTries) {
      queue.push_back(&op);
      return;
    }
    read_completions();
    if (lost && op.kind == Op::Kind::Send) {  // found lost while reading
      ops_.erase(user);
      user->done(lost, 0);
      return;
    }
  }
  withdraw_if_lost(op);
}

void FabricPipe::withdraw_if_lost(Op& op) {
  // A receive from a lost peer may still match what the peer sent before it left
  // (already here, unexpected); anything else it could wait for will never come.
  if (op.peer < 0) return;  // from any rank: no one peer's loss ends it
  const std::exception_ptr& lost = peer_errors_[static_cast<size_t>(op.peer)];
  if (lost && op.kind == Op::Kind::Recv) {
    op.fail_with = lost;
    (void)fi_cancel(&endpoint_.ep()->fid, &op.context);
  }
}

int FabricPipe::post(Op& op) noexcept {
  fid_ep* ep = endpoint_.ep();
  const fi_addr_t peer = op.peer >= 0 ? peers_[static_cast<size_t>(op.peer)] : FI_ADDR_UNSPEC;
  switch (op.kind) {
    case Op::Kind::Send:
      return static_cast<int>(fi_tsend(ep, op.buf, op.len, op.mr.desc(), peer,
                                       op.tagged ? op.fabric_tag : tags_.data_tag(rank(), op.tag), &op.context));
    case Op::Kind::Recv:
      // Tagged receives all name no source (the sender is in the tag): one list
      // in the provider, matched in posting order whichever peer they are for.
      if (op.tagged) {
        return static_cast<int>(fi_trecv(ep, op.target(), op.target_len(), op.mr.desc(), FI_ADDR_UNSPEC,
                                         op.fabric_tag, op.ignore, &op.context));
      }
      return static_cast<int>(fi_trecv(ep, op.target(), op.target_len(), op.mr.desc(),
                                       endpoint_.directed_recv() ? peer : FI_ADDR_UNSPEC,
                                       tags_.data_tag(op.peer, op.tag), 0, &op.context));
    case Op::Kind::GoodbyeSend:
      return static_cast<int>(fi_tsend(ep, nullptr, 0, nullptr, peer, tags_.goodbye_tag(rank()), &op.context));
    case Op::Kind::GoodbyeRecv:
      return static_cast<int>(
          fi_trecv(ep, nullptr, 0, nullptr, FI_ADDR_UNSPEC, tags_.goodbye_tag(0), tags_.goodbye_ignore(), &op.context));
    case Op::Kind::Peek:
      break;  // peek() posts it
  }
  return -FI_EINVAL;
}

std::exception_ptr FabricPipe::post_error(Op& op, int rc) {
  const std::string text = fmt::format("libfabric refused the {}: {}", op.what(), fi_error_text(rc));
  if (means_peer_lost(rc)) {
    lose_peer(op.peer, text, &op);
    return peer_errors_[static_cast<size_t>(op.peer)];
  }
  return std::make_exception_ptr(ConnectionError(text, context_at(kOp, rank(), op.peer, __FILE__, __LINE__)));
}

bool FabricPipe::post_internal(Op& op) {
  for (int tries = 1; tries <= kPostTries; ++tries) {
    const int rc = post(op);
    if (rc == 0) {
      op.posted = true;
      return true;
    }
    if (rc != -FI_EAGAIN) return false;
    read_completions();
  }
  return false;
}

void FabricPipe::post_queued() {
  for (std::deque<Op*>& queue : queued_) {
    while (!queue.empty()) {
      Op& op = *queue.front();
      const int rc = post(op);
      if (rc == -FI_EAGAIN) break;
      queue.pop_front();
      if (rc == 0) {
        op.posted = true;
        withdraw_if_lost(op);
      } else {
        finish(op, post_error(op, rc), 0);
      }
    }
  }
}

std::deque<FabricPipe::Op*>& FabricPipe::queue_of(int peer) {
  if (queued_.size() <= static_cast<size_t>(size())) queued_.resize(static_cast<size_t>(size()) + 1);
  return queued_[static_cast<size_t>(peer)];
}

std::deque<FabricPipe::Op*>& FabricPipe::queue_for(const Op& op) {
  return queue_of(op.kind == Op::Kind::Recv && op.tagged ? size() : op.peer);
}

int FabricPipe::progress() {
  if (goodbye_recv_ && !goodbye_recv_->posted && !closing_) (void)post_internal(*goodbye_recv_);
  post_queued();
  read_completions();
  const int completed = deliver();
  if (completed > 0) idle_nap_us_.store(kMinIdleNapUs);
  return completed;
}

void FabricPipe::read_completions() {
  fid_cq* cq = endpoint_.cq();
  fi_cq_tagged_entry entries[kBatch];
  for (int reads = 0; reads < kMaxReadsPerCall; ++reads) {
    const ssize_t n = fi_cq_read(cq, entries, kBatch);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) on_completion(entries[i]);
      continue;
    }
    if (n == -FI_EAGAIN) return;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry error{};
      if (fi_cq_readerr(cq, &error, 0) == 1) on_error(error);
      continue;
    }
    // The queue itself failed: nothing more will complete, every peer is out of reach.
    const std::string why =
        fmt::format("reading libfabric's completion queue failed: {}", fi_error_text(static_cast<int>(n)));
    for (int peer = 0; peer < size(); ++peer) {
      if (peer != rank()) lose_peer(peer, why);
    }
    return;
  }
}

void FabricPipe::on_completion(const fi_cq_tagged_entry& entry) {
  if (entry.op_context == nullptr) return;
  Op& op = *static_cast<Op::Context*>(entry.op_context)->self;
  op.posted = false;
  switch (op.kind) {
    case Op::Kind::Send:
      finish(op, nullptr, op.len);
      return;
    case Op::Kind::Recv:
      if (op.sender_out != nullptr) *op.sender_out = entry.tag;
      if (!op.landing) {
        finish(op, nullptr, entry.len);
      } else if (entry.len > op.len) {
        // A tagged receive's caller names both lengths: it gets the message's.
        finish(op, too_long(op, entry.len, entry.tag), op.tagged ? entry.len : 0);
      } else {
        if (entry.len > 0) std::memcpy(op.buf, op.landing.get(), entry.len);
        finish(op, nullptr, entry.len);
      }
      return;
    case Op::Kind::GoodbyeSend:
      return;
    case Op::Kind::GoodbyeRecv: {
      const int sender = tags_.sender_of(entry.tag);
      if (sender != rank() && sender < size()) {
        if (!peer_errors_[static_cast<size_t>(sender)]) departed_[static_cast<size_t>(sender)] = 1;
        lose_peer(sender, fmt::format("rank {} closed its libfabric endpoint (its pipe was destroyed: it is "
                                      "shutting down or gave up on this channel)",
                                      sender));
      }
      // Posted again here or, when the provider is busy, by the next progress().
      if (!closing_ && post(op) == 0) op.posted = true;
      return;
    }
    case Op::Kind::Peek:
      op.peek_found = Probed{entry.tag, entry.len};
      op.peeked = PeekResult::Found;
      return;
  }
}

void FabricPipe::on_error(const fi_cq_err_entry& entry) {
  if (entry.op_context == nullptr) return;  // nothing to pin it on
  Op& op = *static_cast<Op::Context*>(entry.op_context)->self;
  // Positive by the spec; shm (1.17) reports some negated.
  const int code = entry.err < 0 ? -entry.err : entry.err;
  op.posted = false;
  if (op.kind == Op::Kind::Peek) {
    op.peeked = code == FI_ENOMSG ? PeekResult::NoMessage : PeekResult::Failed;
    return;
  }
  if (op.kind == Op::Kind::GoodbyeSend) return;
  if (op.kind == Op::Kind::GoodbyeRecv) {
    if (!closing_ && code != FI_ECANCELED && post(op) == 0) op.posted = true;
    return;
  }
  if (code == FI_ECANCELED) {
    if (op.cancel_requested) {
      finish(op,
             std::make_exception_ptr(Error(fmt::format("the {} was cancelled", op.what()),
                                           context_at(kOp, rank(), op.peer, __FILE__, __LINE__))),
             0, /*withdrawn=*/true);
    } else if (op.fail_with) {
      finish(op, op.fail_with, 0);
    } else {
      finish(op,
             std::make_exception_ptr(ConnectionError(
                 fmt::format("libfabric cancelled the {}: {}", op.what(), completion_error_text(endpoint_.cq(), entry)),
                 context_at(kOp, rank(), op.peer, __FILE__, __LINE__))),
             0);
    }
    return;
  }
  if (code == FI_ETRUNC && op.kind == Op::Kind::Recv) {
    // The provider wrote no more than the buffer holds. How long the message was
    // is told differently by each: olen the bytes dropped (tcp;ofi_rxm's
    // rendezvous, with len the whole message), or nothing (rxm's eager path, shm).
    const size_t whole = entry.olen > 0 ? op.target_len() + entry.olen : entry.len > op.target_len() ? entry.len : 0;
    if (op.sender_out != nullptr) *op.sender_out = entry.tag;
    finish(op, too_long(op, whole, entry.tag), op.tagged ? whole : 0);
    return;
  }
  if (op.fail_with) {
    finish(op, op.fail_with, 0);
    return;
  }
  const std::string text = fmt::format("the {} failed: {}", op.what(), completion_error_text(endpoint_.cq(), entry));
  // A reliable endpoint that cannot deliver a send has lost its way to the peer.
  if (op.kind == Op::Kind::Send || means_peer_lost(code)) {
    lose_peer(op.peer, text, &op);
    finish(op, peer_errors_[static_cast<size_t>(op.peer)], 0);
    return;
  }
  finish(op, std::make_exception_ptr(ConnectionError(text, context_at(kOp, rank(), op.peer, __FILE__, __LINE__))), 0);
}

std::exception_ptr FabricPipe::too_long(const Op& op, size_t message_bytes, uint64_t message_tag) const {
  const std::string sent = message_bytes > 0 ? fmt::format("a message of {} bytes", message_bytes)
                                             : std::string("a message (libfabric does not say how long)");
  // A tagged receive from any rank learns the sender from the message's tag.
  const int sender = op.tagged && native_ ? native_origin(message_tag).sender : op.peer;
  return std::make_exception_ptr(
      ValueError(fmt::format("{} from rank {} (tag {}) is longer than the receive buffer of {} bytes; the receive "
                             "failed and the message is dropped",
                             sent, sender, op.tag, op.len),
                 context_at(kOp, rank(), sender, __FILE__, __LINE__)));
}

void FabricPipe::finish(Op& op, std::exception_ptr error, size_t bytes, bool withdrawn) {
  finished_.push_back({op.user, std::move(error), bytes, withdrawn});
  ops_.erase(op.user);  // closes its registration; `op` is gone
}

int FabricPipe::deliver() {
  int delivered = 0;
  // done() may start new ops, which may finish at once: take the list first.
  while (!finished_.empty()) {
    std::vector<Finished> batch;
    batch.swap(finished_);
    for (Finished& f : batch) {
      f.user->done(std::move(f.error), f.bytes);
      ++delivered;
    }
  }
  return delivered;
}

void FabricPipe::lose_peer(int peer, const std::string& why, const Op* completing) {
  std::exception_ptr& slot = peer_errors_[static_cast<size_t>(peer)];
  if (slot) return;
  slot = std::make_exception_ptr(PeerLost(why, context_at(kOp, rank(), peer, __FILE__, __LINE__)));
  std::vector<Op*> affected;
  for (auto& [user, op] : ops_) {
    if (op->peer == peer && op.get() != completing) affected.push_back(op.get());
  }
  for (Op* op : affected) {
    if (op->posted) {
      // A posted receive waits for a message that will not come: withdraw it (its
      // FI_ECANCELED completion reports fail_with). A send's completion comes on its own.
      withdraw_if_lost(*op);
      op->fail_with = slot;
      continue;
    }
    // A queued send fails now; a queued receive is withdrawn once posted (it may
    // match what the peer sent before it left). Ops not yet queued are start()'s.
    std::deque<Op*>& queue = queue_for(*op);
    auto queued = std::find(queue.begin(), queue.end(), op);
    if (queued != queue.end() && op->kind == Op::Kind::Send) {
      queue.erase(queued);
      finish(*op, slot, 0);
    }
  }
}

bool FabricPipe::cancel(pipe::PipeOp* user) {
  auto it = ops_.find(user);
  if (it == ops_.end()) return false;  // finished (its done() may still be on its way)
  Op& op = *it->second;
  if (!op.posted) {
    std::deque<Op*>& queue = queue_for(op);
    queue.erase(std::find(queue.begin(), queue.end(), &op));
    ops_.erase(it);
    return true;
  }
  // A send handed to the provider cannot be taken back on every provider; it
  // completes on its own.
  if (op.kind != Op::Kind::Recv) return false;
  op.cancel_requested = true;
  if (fi_cancel(&endpoint_.ep()->fid, &op.context) != 0) {
    op.cancel_requested = false;
    return false;
  }
  // fi_cancel is asynchronous: the receive is withdrawn once its FI_ECANCELED
  // completion is read (or it completed first after all).
  const auto deadline = net::Clock::now() + kCancelWait;
  for (;;) {
    read_completions();
    auto f = std::find_if(finished_.begin(), finished_.end(), [&](const Finished& x) { return x.user == user; });
    if (f != finished_.end()) {
      if (!f->withdrawn) return false;
      finished_.erase(f);
      return true;
    }
    // Not confirmed in time: it stays withdrawn-on-request and its done() (with
    // "cancelled") comes from progress() whenever the provider reports it.
    if (net::Clock::now() >= deadline) return false;
    nap(microseconds(20));
  }
}

bool FabricPipe::arm() {
  if (!finished_.empty()) return false;
  if (std::any_of(queued_.begin(), queued_.end(), [](const auto& q) { return !q.empty(); })) {
    nap_us_.store(kQueuedNapUs);
    return true;
  }
  if (endpoint_.wait_fd() < 0) {
    nap_us_.store(-1);
    return true;
  }
  const int rc = endpoint_.trywait();
  if (rc == -FI_EAGAIN) return false;
  // Any other failure: blocking on the fd is not known to be safe; nap instead.
  nap_us_.store(rc == 0 ? 0 : kQueuedNapUs);
  return true;
}

void FabricPipe::sleep(net::Deadline until, bool busy) {
  int64_t nap = nap_us_.load();
  if (nap < 0) {
    if (busy) {
      nap = kBusyNapUs;
    } else {
      nap = idle_nap_us_.load();
      idle_nap_us_.store(std::min(nap * 2, kMaxIdleNapUs));
    }
  }
  sleeper_.sleep(endpoint_.wait_fd(), until, microseconds(nap));
}

std::exception_ptr FabricPipe::peer_error(int peer) const {
  if (peer < 0 || peer >= size()) return nullptr;
  return peer_errors_[static_cast<size_t>(peer)];
}

bool FabricPipe::peer_departed(int peer) const {
  if (peer < 0 || peer >= size()) return false;
  return departed_[static_cast<size_t>(peer)] != 0;
}

void FabricPipe::close() noexcept {
  try {
    const auto start = net::Clock::now();
    const auto settle = [&](auto&& pending, net::Deadline deadline) {
      while (pending() && net::Clock::now() < deadline) {
        read_completions();
        if (pending()) nap(microseconds(50));
      }
    };
    // Goodbyes already here first: a peer that left gets none back (with shm in
    // one process a send to a closed endpoint would touch its freed memory). The
    // goodbye receive matches one at a time, so read until no new one comes.
    const auto lost = [&] {
      return std::count_if(peer_errors_.begin(), peer_errors_.end(), [](const auto& e) { return e != nullptr; });
    };
    for (int round = 0; round < size(); ++round) {
      const auto before = lost();
      read_completions();
      if (lost() == before) break;
    }
    closing_ = true;
    // Never handed to the provider: nothing to undo.
    for (auto& queue : queued_) {
      for (Op* op : queue) ops_.erase(op->user);
      queue.clear();
    }

    // Sends in flight first: a peer must get what this rank sent before its
    // goodbye, and a large send needs this side's progress to finish. Sends to a
    // lost peer are not waited for; one stuck on a peer that died unnoticed (see
    // the docs) costs kFlushWait, and the goodbyes still get their time.
    settle(
        [&] {
          return std::any_of(ops_.begin(), ops_.end(), [&](const auto& kv) {
            return kv.second->kind == Op::Kind::Send && !peer_errors_[static_cast<size_t>(kv.second->peer)];
          });
        },
        start + kFlushWait);
    const auto deadline = start + kCloseWait;

    for (int peer = 0; peer < size(); ++peer) {
      if (peer == rank() || peer_errors_[static_cast<size_t>(peer)]) continue;
      auto bye = std::make_unique<Op>(Op::Kind::GoodbyeSend, peer, 0, nullptr, 0, nullptr);
      for (;;) {
        const int rc = post(*bye);
        if (rc == 0) bye->posted = true;
        if (rc != -FI_EAGAIN || net::Clock::now() >= deadline) break;
        read_completions();
      }
      goodbye_sends_.push_back(std::move(bye));
    }

    for (auto& [user, op] : ops_) {
      if (op->posted && op->kind == Op::Kind::Recv) (void)fi_cancel(&endpoint_.ep()->fid, &op->context);
    }
    if (goodbye_recv_ && goodbye_recv_->posted) (void)fi_cancel(&endpoint_.ep()->fid, &goodbye_recv_->context);

    settle(
        [&] {
          const auto posted = [](const std::unique_ptr<Op>& op) { return op->posted; };
          return !ops_.empty() || (goodbye_recv_ && goodbye_recv_->posted) ||
                 std::any_of(goodbye_sends_.begin(), goodbye_sends_.end(), posted);
        },
        deadline);
  } catch (...) {
    // Teardown goes on regardless: closing the endpoint below ends every op.
  }
  finished_.clear();
  if (lifeline_) {
    // In-process peers may still reach this endpoint's memory (a goodbye, a late
    // send): it stays open, with every op the provider may still touch, until the
    // last of them has closed too (in_process_peers.h).
    Lifeline::Remains remains{std::move(endpoint_), {}};
    for (auto& [user, op] : ops_) remains.ops.emplace_back(std::move(op));
    if (goodbye_recv_) remains.ops.emplace_back(std::move(goodbye_recv_));
    for (auto& bye : goodbye_sends_) remains.ops.emplace_back(std::move(bye));
    if (peek_) remains.ops.emplace_back(std::move(peek_));
    for (auto& p : unanswered_peeks_) remains.ops.emplace_back(std::move(p));
    lifeline_->park(std::move(remains));
  } else {
    // After this the provider touches no op's buffer or context, so they may go
    // (their registrations before the domain, which closes with endpoint_).
    endpoint_.close_endpoint();
  }
  ops_.clear();
  goodbye_recv_.reset();
  goodbye_sends_.clear();
  peek_.reset();
  unanswered_peeks_.clear();
  // Letting go of the peers' endpoints (and this one's) closes those no pipe of
  // this process needs any more.
  in_process_peers_.clear();
  lifeline_.reset();
}

}  // namespace thd::detail::libfabric
