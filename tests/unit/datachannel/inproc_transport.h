// An in-memory Transport for tests: the ranks of a world are threads of this
// process and messages go through one mailbox per receiving rank (a mutex and two
// queues). It keeps transport.h's contract — MPI matching with accept_match(),
// FIFO per (source, context, tag), any-source, cancel — without sockets, so the
// collective algorithms can be tested fast and with any world size.
//
// Small messages are copied at send time (eager) and the send completes at once;
// larger ones wait in the queue until a receive takes them (rendezvous, one copy),
// so an algorithm that only works if sends are buffered deadlocks here instead of
// in production. kill(rank) simulates a lost process, slow_down_sends(rank) a
// rank that falls behind, and overtaken() counts the messages that arrived before
// their receive at a rank already in their call.
#pragma once

#include <thd/error.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "datachannel/collectives/mismatch_notice.h"
#include "datachannel/envelope.h"
#include "datachannel/matching.h"
#include "datachannel/request_state.h"
#include "datachannel/transport.h"

namespace thd::test {

class InprocWorld {
 public:
  // Messages up to this size are copied when sent; larger ones wait for their receive.
  static constexpr size_t kEagerBytes = 16 * 1024;

  explicit InprocWorld(int size) : lost_(static_cast<size_t>(size)) {
    for (int i = 0; i < size; ++i) boxes_.push_back(std::make_unique<Mailbox>());
  }

  int size() const { return static_cast<int>(boxes_.size()); }

  void post_send(int src, std::span<const uint8_t> data, int dst, const detail::Envelope& envelope,
                 const std::shared_ptr<detail::RequestState>& request) {
    if (src == slow_rank_ && ++slow_sends_ % slow_every_ == 0) std::this_thread::sleep_for(slow_pause_);
    sent_.fetch_add(1, std::memory_order_relaxed);
    if (auto lost = peer_error(dst)) {
      request->fail(lost);
      return;
    }
    Mailbox& box = *boxes_[static_cast<size_t>(dst)];
    std::lock_guard lock(box.mu);
    for (auto it = box.posted.begin(); it != box.posted.end(); ++it) {
      if (!matches(it->src, it->envelope, src, envelope)) continue;
      deliver(dst, src, *it, data, envelope);
      box.posted.erase(it);
      request->complete(src, data.size());
      return;
    }
    if (const auto it = box.posted_per_call.find({envelope.context, envelope.tag});
        it != box.posted_per_call.end() && it->second >= overtaken_after_) {
      overtaken_.fetch_add(1);
    }
    Message m{src, envelope, {}, data, request};
    if (data.size() <= kEagerBytes) {
      m.eager.assign(data.begin(), data.end());
      m.payload = {};
      m.send_request = nullptr;
      request->complete(src, data.size());
    }
    box.unexpected.push_back(std::move(m));
  }

  void post_recv(int dst, std::span<uint8_t> data, int src, const detail::Envelope& envelope,
                 const std::shared_ptr<detail::RequestState>& request) {
    Mailbox& box = *boxes_[static_cast<size_t>(dst)];
    std::lock_guard lock(box.mu);
    ++box.posted_per_call[{envelope.context, envelope.tag}];
    PostedRecv recv{src, envelope, data, request};
    for (auto it = box.unexpected.begin(); it != box.unexpected.end(); ++it) {
      if (!matches(src, envelope, it->src, it->envelope)) continue;
      const std::span<const uint8_t> payload = it->send_request ? it->payload : std::span<const uint8_t>(it->eager);
      deliver(dst, it->src, recv, payload, it->envelope);
      if (it->send_request) it->send_request->complete(it->src, payload.size());
      box.unexpected.erase(it);
      return;
    }
    if (src != kAnySource) {
      if (auto lost = peer_error(src)) {
        request->fail(lost);
        return;
      }
    }
    box.posted.push_back(std::move(recv));
  }

  void cancel(const std::shared_ptr<detail::RequestState>& request, std::exception_ptr why) {
    for (auto& box : boxes_) {
      std::lock_guard lock(box->mu);
      std::erase_if(box->posted, [&](const PostedRecv& r) { return r.request == request; });
      std::erase_if(box->unexpected, [&](const Message& m) { return m.send_request == request; });
    }
    request->fail(std::move(why));
  }

  // The process of `rank` is gone: every request that needs it fails with
  // PeerLost, now and from now on.
  void kill(int rank) {
    std::exception_ptr why;
    try {
      ErrorContext context;
      context.peer = rank;
      throw PeerLost("rank " + std::to_string(rank) + " was lost (simulated)", context);
    } catch (...) {
      why = std::current_exception();
    }
    {
      std::lock_guard lock(lost_mu_);
      lost_[static_cast<size_t>(rank)] = why;
    }
    for (size_t d = 0; d < boxes_.size(); ++d) {
      Mailbox& box = *boxes_[d];
      std::lock_guard lock(box.mu);
      const bool dead_box = static_cast<int>(d) == rank;
      std::erase_if(box.posted, [&](const PostedRecv& r) {
        if (!dead_box && r.src != rank) return false;
        r.request->fail(why);
        return true;
      });
      std::erase_if(box.unexpected, [&](const Message& m) {
        if (!dead_box && m.src != rank) return false;
        if (m.send_request) m.send_request->fail(why);
        return true;
      });
    }
  }

  std::exception_ptr peer_error(int rank) const {
    std::lock_guard lock(lost_mu_);
    return lost_[static_cast<size_t>(rank)];
  }

  // Messages posted for sending so far, by every rank.
  uint64_t sent() const { return sent_.load(std::memory_order_relaxed); }

  // From now on every `every`-th send `rank` posts waits `pause` first, as a rank
  // that lags behind its peers (its receives posted ahead are in place by then).
  // Set before the ranks run.
  void slow_down_sends(int rank, uint64_t every, std::chrono::microseconds pause) {
    slow_rank_ = rank;
    slow_every_ = every;
    slow_pause_ = pause;
  }

  // Messages that found no receive at a rank that had posted at least
  // count_overtaken_after() receives of the same call (context and tag) before:
  // they overtook what that rank posted ahead, and a real transport would have
  // had to buffer them.
  uint64_t overtaken() const { return overtaken_.load(); }
  // A rank's first receives of a call are posted one by one while its peers may
  // already send: only messages arriving after `receives` of them count. Set
  // before the ranks run.
  void count_overtaken_after(size_t receives) { overtaken_after_ = receives; }

  // Receives posted and not matched, plus messages sent and not received: 0
  // once every collective has finished or withdrawn its messages.
  size_t pending() const {
    size_t n = 0;
    for (const auto& box : boxes_) {
      std::lock_guard lock(box->mu);
      n += box->posted.size() + box->unexpected.size();
    }
    return n;
  }
  // Of those, the mismatch notices nobody received (collectives/mismatch_notice.h).
  size_t unreceived_notices() const {
    size_t n = 0;
    for (const auto& box : boxes_) {
      std::lock_guard lock(box->mu);
      for (const Message& m : box->unexpected) n += detail::is_mismatch_notice(m.envelope) ? 1 : 0;
    }
    return n;
  }

 private:
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> overtaken_{0};
  size_t overtaken_after_ = 1;
  int slow_rank_ = -1;
  uint64_t slow_every_ = 1;
  std::chrono::microseconds slow_pause_{0};
  uint64_t slow_sends_ = 0;  // the slow rank's own thread only
  struct Message {
    int src;
    detail::Envelope envelope;
    std::vector<uint8_t> eager;                          // the bytes of an eager message
    std::span<const uint8_t> payload;                    // the sender's bytes of a rendezvous one
    std::shared_ptr<detail::RequestState> send_request;  // rendezvous only
  };
  struct PostedRecv {
    int src;  // or kAnySource
    detail::Envelope envelope;
    std::span<uint8_t> data;
    std::shared_ptr<detail::RequestState> request;
  };
  struct Mailbox {
    mutable std::mutex mu;
    std::deque<Message> unexpected;  // arrival order
    std::deque<PostedRecv> posted;   // posting order
    std::map<std::pair<uint32_t, int64_t>, size_t> posted_per_call;  // receives posted, by (context, tag)
  };

  static bool matches(int want_src, const detail::Envelope& want, int src, const detail::Envelope& got) {
    return (want_src == kAnySource || want_src == src) && want.context == got.context && want.tag == got.tag;
  }

  // Fills a matched receive, or fails it (payload dropped) when the message is
  // not what it expects. Called with the receiver's mailbox locked.
  static void deliver(int dst, int src, const PostedRecv& recv, std::span<const uint8_t> payload,
                      const detail::Envelope& envelope) {
    detail::PostedRecv matched{recv.request, recv.data, recv.src, recv.envelope};
    if (auto mismatch = detail::accept_match(dst, src, matched, envelope, payload.size())) {
      recv.request->fail(mismatch);
      return;
    }
    if (!payload.empty()) std::memcpy(matched.data.data(), payload.data(), payload.size());
    recv.request->complete(src, payload.size());
  }

  std::vector<std::unique_ptr<Mailbox>> boxes_;
  mutable std::mutex lost_mu_;
  std::vector<std::exception_ptr> lost_;
};

class InprocTransport final : public detail::Transport {
 public:
  InprocTransport(std::shared_ptr<InprocWorld> world, int rank)
      : Transport(rank, world->size()), world_(std::move(world)) {}

  std::string_view name() const noexcept override { return "inproc"; }

  void post_send(std::span<const uint8_t> data, int dst, const detail::Envelope& envelope,
                 const std::shared_ptr<detail::RequestState>& request) override {
    world_->post_send(rank(), data, dst, envelope, request);
  }
  void post_recv(std::span<uint8_t> data, int src, const detail::Envelope& envelope,
                 const std::shared_ptr<detail::RequestState>& request) override {
    world_->post_recv(rank(), data, src, envelope, request);
  }
  void cancel(const std::shared_ptr<detail::RequestState>& request, std::exception_ptr why) override {
    world_->cancel(request, std::move(why));
  }
  std::exception_ptr peer_error(int world_rank) const override { return world_->peer_error(world_rank); }

 private:
  std::shared_ptr<InprocWorld> world_;
};

}  // namespace thd::test
