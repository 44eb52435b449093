// An in-process MessagePipe for PipeTransport's tests: the pipes of one
// MemoryFabric deliver to each other through queues, so a test can drive the
// engine deterministically, inject bytes a real peer would never send, hold a
// peer's messages back, and declare a peer lost.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "datachannel/pipe/message_pipe.h"

namespace thd::test {

class MemoryPipe;

class MemoryFabric {
 public:
  // `detects_silent_loss`: what the pipes answer to detects_silent_peer_loss();
  // false makes PipeTransport run its heartbeats over them (as over libfabric).
  // `native`: the pipes match point-to-point envelopes that fit a tag of their own
  // (group and tag below 2^16, dtype, sender) themselves, as UCX's do.
  explicit MemoryFabric(int size, bool detects_silent_loss = true, bool native = false)
      : size_(size),
        detects_silent_loss_(detects_silent_loss),
        native_(native),
        pipes_(static_cast<size_t>(size), nullptr) {}
  int size() const { return size_; }
  // The pipe of `rank` (the fabric keeps a pointer; the caller owns it).
  std::unique_ptr<MemoryPipe> make_pipe(int rank, uint32_t max_tag = 1u << 20);
  // Bytes from `from` to `to` on `tag` that no PipeTransport wrote.
  void inject(int from, int to, uint32_t tag, std::vector<uint8_t> bytes);
  // Makes every pending and later op between `rank` and the others fail.
  void lose(int rank);
  // The pipe of `rank` made by make_pipe (alive while its owner keeps it).
  MemoryPipe& pipe(int rank);

 private:
  friend class MemoryPipe;
  struct Message {
    std::vector<uint8_t> bytes;
  };
  struct PostedRecv {
    std::span<uint8_t> into;
    detail::pipe::PipeOp* op;
  };
  struct Done {
    detail::pipe::PipeOp* op;
    std::exception_ptr error;
    size_t bytes;
  };
  using Key = std::pair<int, uint32_t>;  // (source, tag)
  struct TaggedMessage {
    uint64_t tag;
    std::vector<uint8_t> bytes;
  };
  struct TaggedRecv {
    uint64_t tag;
    uint64_t mask;
    std::span<uint8_t> into;
    uint64_t* sender_tag;
    detail::pipe::PipeOp* op;
  };
  struct Inbox {
    std::map<Key, std::deque<Message>> arrived;
    std::map<Key, std::deque<PostedRecv>> posted;
    std::deque<TaggedMessage> tagged_arrived;  // in arrival order
    std::deque<TaggedRecv> tagged_posted;      // in posting order
    std::vector<Done> done;
  };
  // A tagged message meets a tagged receive: copied (at most its room) and done.
  void take_tagged(Inbox& in, const TaggedRecv& r, TaggedMessage& m);
  void deliver(int from, int to, uint32_t tag, std::vector<uint8_t> bytes);  // under mu_
  void match(int rank, const Key& key);                                      // under mu_

  std::mutex mu_;
  int size_;
  bool detects_silent_loss_;
  bool native_;
  std::vector<MemoryPipe*> pipes_;
  std::vector<Inbox> inboxes_{static_cast<size_t>(size_)};
  std::vector<bool> lost_ = std::vector<bool>(static_cast<size_t>(size_), false);
};

class MemoryPipe final : public detail::pipe::MessagePipe {
 public:
  MemoryPipe(MemoryFabric& fabric, int rank, uint32_t max_tag)
      : MessagePipe(rank, fabric.size()), fabric_(fabric), max_tag_(max_tag) {}
  ~MemoryPipe() override;

  std::string_view name() const noexcept override { return "memory"; }
  uint32_t max_tag() const noexcept override { return max_tag_; }
  void send(int peer, uint32_t tag, std::span<const uint8_t> data, detail::pipe::PipeOp* op) override;
  void recv(int peer, uint32_t tag, std::span<uint8_t> data, detail::pipe::PipeOp* op) override;
  bool cancel(detail::pipe::PipeOp* op) override;
  int progress() override;
  bool arm() override;
  void sleep(net::Deadline until, bool busy) override;
  void interrupt() noexcept override;
  std::exception_ptr peer_error(int peer) const override;
  bool detects_silent_peer_loss() const noexcept override { return fabric_.detects_silent_loss_; }

  // Matching by the pipe itself, when the fabric was made `native`. Tag: bit 62,
  // dtype in bits 48..55, sender in 32..47, group in 16..31, tag in 0..15.
  bool matches_natively() const noexcept override { return fabric_.native_; }
  std::optional<uint64_t> native_tag(const detail::Envelope& envelope, int sender) const override;
  NativeMatch native_match(const detail::Envelope& envelope, int source) const override;
  NativeOrigin native_origin(uint64_t tag) const override;
  void send_tagged(int peer, uint64_t tag, std::span<const uint8_t> data, detail::pipe::PipeOp* op) override;
  void recv_tagged(int peer, uint64_t tag, uint64_t mask, std::span<uint8_t> data, uint64_t* sender_tag,
                   detail::pipe::PipeOp* op) override;
  std::optional<Probed> probe_tagged(uint64_t tag, uint64_t mask) override;
  // How many tagged sends and receives this pipe was asked for.
  int tagged_calls() const { return tagged_calls_.load(); }

  // Every send() and recv() this pipe was asked for, in order.
  struct Call {
    bool send = false;
    int peer = -1;
    uint32_t tag = 0;
    size_t bytes = 0;  // what was sent, or the room of a receive
  };
  std::vector<Call> calls();
  // How often interrupt() was called; how many threads are in sleep() now.
  int interrupts() const { return interrupts_.load(); }
  int sleepers() const { return sleepers_.load(); }
  // How often progress() was called (by waiters and the progress thread).
  int64_t progress_calls() const { return progress_calls_.load(); }
  // While held, an interrupt does not end a sleep (a sleeper the scheduler has
  // not run yet); its deadline still does.
  void hold_wakeups(bool held);
  // Whether send() reports its outcome from within the call (as UCX does for a
  // small eager send) instead of at the next progress().
  void finish_sends_at_once(bool at_once) { sends_at_once_ = at_once; }

 private:
  friend class MemoryFabric;
  void wake();

  MemoryFabric& fabric_;
  const uint32_t max_tag_;
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
  bool woken_ = false;
  bool held_ = false;
  bool sends_at_once_ = false;
  std::vector<Call> calls_;  // under fabric_.mu_
  std::atomic<int> interrupts_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<int64_t> progress_calls_{0};
  std::atomic<int> tagged_calls_{0};
};

}  // namespace thd::test
