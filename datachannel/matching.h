// MPI's matching rules for the receive side of the transports that match in
// software (tcp, and pipe under mpi, ucx and libfabric): the receives posted and
// not yet matched, and the messages that arrived before any receive took them
// ("unexpected" messages).
//
// Both are kept per (context, tag) key, in order. An arriving message goes to the
// earliest-posted receive whose source is its sender or kAnySource; a new receive
// takes the oldest unexpected message from its source (or from anyone, for
// kAnySource). So messages from one sender with one key are received in send
// order, and any-source and specific receives mixed on one key are served in the
// order they were posted. Invariant: no unexpected message matches a posted
// receive (whichever of the two came second was matched on arrival).
//
// A receive posted while no other is (a blocking receive's, nearly always) is kept
// apart, as the "solo" receive: on a round trip's latency path, matching it in its
// bucket cost a bucket lookup, a list walk, a node splice and an emptiness check per
// message. It is older than every receive in the buckets, so a message looks at it
// first, and it leaves with the first message it takes.
//
// Not thread-safe: the transport's engine lock guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "datachannel/envelope.h"
#include "datachannel/request_state.h"
#include "datachannel/wire.h"

namespace thd::detail {

struct PostedRecv {
  std::shared_ptr<RequestState> request;
  std::span<uint8_t> data;
  int source = -1;  // a world rank or kAnySource
  Envelope envelope;
};

// Checks a message matched to `recv` (check_match) and, for a receive of any
// length (RequestState::any_length), gives it the message's size and a buffer
// (recv.data) to land in: a message of bytes up to the receive's limit is
// accepted, and `adopt`, when given, is taken as that buffer instead of making one
// (an unexpected message's payload that arrived whole). nullptr when the message
// is taken; otherwise the error to fail the receive with (the message is then
// discarded): a message over the limit is a ValueError naming both lengths, a
// tensor's message a TypeError.
std::exception_ptr accept_any_length(int rank, int peer, PostedRecv& recv, const Envelope& got, size_t got_bytes,
                                     std::unique_ptr<uint8_t[]>* adopt);
inline std::exception_ptr accept_match(int rank, int peer, PostedRecv& recv, const Envelope& got, size_t got_bytes,
                                       std::unique_ptr<uint8_t[]>* adopt = nullptr) {
  if (!recv.request->any_length) [[likely]] {
    return check_match(rank, peer, recv.envelope, recv.data.size(), got, got_bytes);
  }
  return accept_any_length(rank, peer, recv, got, got_bytes, adopt);
}

// A message that arrived before a receive for it was posted. Its payload is read
// into `payload` as it arrives, or, while `parked`, left in the socket (the
// sender's connection is then not read until a receive takes it or there is room
// to buffer it). An announced (rendezvous) message is only its header: its
// payload stays with the sender until a receive takes it.
struct UnexpectedMessage {
  // What each one costs its sender's budget besides a payload held here, so a
  // flood of empty messages (or of announcements) is bounded too.
  static constexpr size_t kOverheadBytes = 256;

  int source = -1;
  FrameHeader header;
  std::unique_ptr<uint8_t[]> payload;  // null while parked and for empty messages
  size_t arrived = 0;                  // payload bytes in `payload`
  size_t charged = 0;                  // bytes counted against its sender's budget
  bool parked = false;

  bool announced() const noexcept { return header.kind == FrameKind::ReadyToSend; }
  bool complete() const noexcept { return !parked && (announced() || arrived == header.payload_bytes); }
};

class MatchQueues {
 public:
  // The earliest-posted receive that takes a message from `source` with this
  // envelope's key, removed from the queue; nullopt when there is none. Receives
  // whose request already finished (failed by someone else) are dropped on the way.
  std::optional<PostedRecv> take_posted(int source, const Envelope& envelope);
  // take_posted without moving the receive out: `use` is called with it in place
  // (it must not touch these queues), and it leaves the queue after. False, and
  // `use` is not called, when no receive takes the message.
  template <typename Use>
  bool take_posted_with(int source, const Envelope& envelope, Use&& use);
  void post(PostedRecv recv);
  // Removes the still unmatched receive of `request`, if it is posted here. It
  // looks through every queue: withdrawing is rare (a deadline, a cancel), while an
  // index by request cost every receive two hash-map updates.
  std::optional<PostedRecv> withdraw(const RequestState* request);
  // Removes and returns every posted receive for which `pred` is true.
  std::vector<PostedRecv> withdraw_if(const std::function<bool(const PostedRecv&)>& pred);

  // The oldest unexpected message that a receive from `source` (a rank or
  // kAnySource) with this envelope's key takes; nullptr when none. The pointer
  // stays valid until the message is erased.
  UnexpectedMessage* find_unexpected(int source, const Envelope& envelope);
  UnexpectedMessage* add_unexpected(UnexpectedMessage message);
  void erase_unexpected(const UnexpectedMessage* message);
  // Erases every unexpected message for which `pred` is true.
  void erase_unexpected_if(const std::function<bool(const UnexpectedMessage&)>& pred);

  size_t posted_count() const noexcept { return posted_count_; }
  // Whether a receive is kept apart (see above); for tests.
  bool has_solo() const noexcept { return has_solo_; }
  size_t unexpected_count() const noexcept { return unexpected_count_; }
  // Keys with a queue, including the few empty ones kept for reuse.
  size_t bucket_count() const noexcept { return buckets_.size(); }

 private:
  struct Key {
    uint32_t context = 0;
    int64_t tag = 0;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const noexcept {
      return std::hash<uint64_t>{}(static_cast<uint64_t>(k.tag) * 0x9e3779b97f4a7c15ULL ^ k.context);
    }
  };
  struct Bucket {
    std::list<PostedRecv> posted;
    std::list<UnexpectedMessage> unexpected;  // a list: pointers stay valid
    bool kept = false;                        // listed in kept_empty_
  };
  using BucketMap = std::unordered_map<Key, Bucket, KeyHash>;
  static Key key_of(const Envelope& e) noexcept { return {e.context, e.tag}; }
  // Collective tags carry a sequence number, so keys come and go: empty buckets go,
  // but the few most recently emptied stay, so that a ping-pong on one tag does not
  // allocate a bucket per message. `may_keep` is false while iterating the buckets.
  void drop_if_empty(BucketMap::iterator it, bool may_keep = true);
  void drop_if_empty(Bucket& bucket, const Key& key) {
    // Inline: a ping-pong's bucket is kept, and this returns here every message.
    if (!bucket.posted.empty() || !bucket.unexpected.empty() || bucket.kept) return;
    drop_if_empty(buckets_.find(key));
  }
  // The bucket of `key` (nullptr when it has none), or made for it. The last one
  // used is remembered: a ping-pong on one key skips the hash lookup.
  Bucket* find_bucket(const Key& key) {
    if (cached_ != nullptr && cached_key_ == key) return cached_;
    return look_up_bucket(key);
  }
  Bucket* look_up_bucket(const Key& key);
  Bucket& bucket(const Key& key);
  // Every bucket leaves through here, so the remembered one never dangles.
  void erase_bucket(BucketMap::iterator it);
  // A posted receive leaves its list; the node is kept for reuse.
  PostedRecv take_out(std::list<PostedRecv>& posted, std::list<PostedRecv>::iterator r);
  // The same, dropping the receive (its request let go).
  void discard(std::list<PostedRecv>& posted, std::list<PostedRecv>::iterator r) {
    r->request.reset();  // the node kept below holds no request
    --posted_count_;
    if (spare_posted_.size() < kSpareNodes) {
      spare_posted_.splice(spare_posted_.end(), posted, r);
    } else {
      posted.erase(r);
    }
  }
  static constexpr size_t kSpareNodes = 64;

  bool solo_takes(int source, const Envelope& envelope) const noexcept {
    return solo_.envelope.context == envelope.context && solo_.envelope.tag == envelope.tag &&
           (solo_.source == source || solo_.source == kAnySource);
  }
  void drop_solo() noexcept {
    solo_.request.reset();
    has_solo_ = false;
    --posted_count_;
  }

  PostedRecv solo_;  // while has_solo_; counted in posted_count_
  bool has_solo_ = false;
  BucketMap buckets_;
  Bucket* cached_ = nullptr;  // nodes of an unordered_map do not move on rehash
  Key cached_key_;
  size_t posted_count_ = 0;
  size_t unexpected_count_ = 0;
  // Nodes of finished receives, reused by post(): no allocation per message.
  std::list<PostedRecv> spare_posted_;
  std::vector<Key> kept_empty_;  // oldest first
};

template <typename Use>
bool MatchQueues::take_posted_with(int source, const Envelope& envelope, Use&& use) {
  if (has_solo_) {
    if (solo_.request->finished()) {  // failed by someone else: dropped on the way
      drop_solo();
    } else if (solo_takes(source, envelope)) {
      use(solo_);
      drop_solo();
      return true;
    } else if (posted_count_ == 1) {
      return false;  // no bucket holds a receive
    }
  }
  const Key key = key_of(envelope);
  Bucket* bucket = find_bucket(key);
  if (bucket == nullptr) return false;
  auto& posted = bucket->posted;
  bool found = false;
  for (auto r = posted.begin(); r != posted.end();) {
    if (r->request->finished()) {  // failed by someone else: dropped on the way
      discard(posted, r++);
      continue;
    }
    if (r->source == source || r->source == kAnySource) {
      use(*r);
      discard(posted, r);
      found = true;
      break;
    }
    ++r;
  }
  drop_if_empty(*bucket, key);
  return found;
}

}  // namespace thd::detail
