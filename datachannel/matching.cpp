#include "datachannel/matching.h"

#include <new>

#include <thd/datachannel.h>

#include "datachannel/check.h"

namespace thd::detail {

std::exception_ptr accept_any_length(int rank, int peer, PostedRecv& recv, const Envelope& got, size_t got_bytes,
                                     std::unique_ptr<uint8_t[]>* adopt) {
  RequestState& r = *recv.request;
  try {
    if (got.kind.op != MessageOp::P2P || got.kind.dtype != kRawBytes) {
      // The error check_match gives a fixed-length receive of that many bytes.
      Envelope expected = recv.envelope;
      expected.kind.count = got_bytes;
      return message_mismatch(rank, peer, expected, got_bytes, got, got_bytes);
    }
    if (got_bytes > r.length_limit) {
      THD_THROW_AT(ValueError, r.op, rank, peer,
                   "rank {} sent a message of {} bytes, longer than the {} bytes this receive takes; the message "
                   "was discarded",
                   peer, got_bytes, r.length_limit);
    }
    if (adopt != nullptr && (*adopt || got_bytes == 0)) {
      r.message = std::move(*adopt);
    } else if (got_bytes > 0) {
      r.message = std::make_unique_for_overwrite<uint8_t[]>(got_bytes);
    }
    recv.data = {r.message.get(), got_bytes};
    return nullptr;
  } catch (const std::bad_alloc&) {
    try {
      THD_THROW_AT(HostOutOfMemoryError, r.op, rank, peer, "out of memory making a buffer for a message of {} bytes",
                   got_bytes);
    } catch (...) {
      return std::current_exception();
    }
  } catch (...) {
    return std::current_exception();
  }
}

namespace {
// How many finished receives' nodes, and how many empty buckets, are kept.
constexpr size_t kKeptEmptyBuckets = 8;
}  // namespace

PostedRecv MatchQueues::take_out(std::list<PostedRecv>& posted, std::list<PostedRecv>::iterator r) {
  PostedRecv out = std::move(*r);
  discard(posted, r);
  return out;
}

MatchQueues::Bucket* MatchQueues::look_up_bucket(const Key& key) {
  auto it = buckets_.find(key);
  if (it == buckets_.end()) return nullptr;
  cached_key_ = key;
  cached_ = &it->second;
  return cached_;
}

MatchQueues::Bucket& MatchQueues::bucket(const Key& key) {
  if (cached_ != nullptr && cached_key_ == key) return *cached_;
  Bucket& b = buckets_[key];
  cached_key_ = key;
  cached_ = &b;
  return b;
}

void MatchQueues::erase_bucket(BucketMap::iterator it) {
  if (cached_ == &it->second) cached_ = nullptr;
  buckets_.erase(it);
}

std::optional<PostedRecv> MatchQueues::take_posted(int source, const Envelope& envelope) {
  std::optional<PostedRecv> found;
  take_posted_with(source, envelope, [&](PostedRecv& recv) { found = std::move(recv); });
  return found;
}

void MatchQueues::post(PostedRecv recv) {
  if (posted_count_ == 0) {
    solo_ = std::move(recv);
    has_solo_ = true;
    ++posted_count_;
    return;
  }
  auto& posted = bucket(key_of(recv.envelope)).posted;
  ++posted_count_;
  if (spare_posted_.empty()) {
    posted.push_back(std::move(recv));
  } else {
    posted.splice(posted.end(), spare_posted_, spare_posted_.begin());
    posted.back() = std::move(recv);
  }
}

std::optional<PostedRecv> MatchQueues::withdraw(const RequestState* request) {
  if (posted_count_ == 0) return std::nullopt;
  if (has_solo_ && solo_.request.get() == request) {
    std::optional<PostedRecv> found = std::move(solo_);
    drop_solo();
    return found;
  }
  for (auto it = buckets_.begin(); it != buckets_.end(); ++it) {
    auto& posted = it->second.posted;
    for (auto r = posted.begin(); r != posted.end(); ++r) {
      if (r->request.get() == request) {
        std::optional<PostedRecv> found = take_out(posted, r);
        drop_if_empty(it);
        return found;
      }
    }
  }
  return std::nullopt;
}

std::vector<PostedRecv> MatchQueues::withdraw_if(const std::function<bool(const PostedRecv&)>& pred) {
  std::vector<PostedRecv> out;
  // The solo receive is the oldest: it comes first, as it would from one queue.
  if (has_solo_ && pred(solo_)) {
    out.push_back(std::move(solo_));
    drop_solo();
  }
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    auto& posted = it->second.posted;
    for (auto r = posted.begin(); r != posted.end();) {
      if (pred(*r)) {
        out.push_back(take_out(posted, r++));
      } else {
        ++r;
      }
    }
    auto next = std::next(it);
    drop_if_empty(it, /*may_keep=*/false);
    it = next;
  }
  return out;
}

UnexpectedMessage* MatchQueues::find_unexpected(int source, const Envelope& envelope) {
  // Most receives find none, and the solo receive's key often has no bucket to
  // remember: no lookup then.
  if (unexpected_count_ == 0) return nullptr;
  Bucket* b = find_bucket(key_of(envelope));
  if (b == nullptr) return nullptr;
  for (auto& m : b->unexpected) {
    if (source == kAnySource || m.source == source) return &m;
  }
  return nullptr;
}

UnexpectedMessage* MatchQueues::add_unexpected(UnexpectedMessage message) {
  auto& list = bucket(key_of(message.header.envelope)).unexpected;
  list.push_back(std::move(message));
  ++unexpected_count_;
  return &list.back();
}

void MatchQueues::erase_unexpected(const UnexpectedMessage* message) {
  const Key key = key_of(message->header.envelope);
  Bucket* b = find_bucket(key);
  if (b == nullptr) return;
  auto& list = b->unexpected;
  for (auto m = list.begin(); m != list.end(); ++m) {
    if (&*m == message) {
      list.erase(m);
      --unexpected_count_;
      break;
    }
  }
  drop_if_empty(*b, key);
}

void MatchQueues::erase_unexpected_if(const std::function<bool(const UnexpectedMessage&)>& pred) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    auto& list = it->second.unexpected;
    for (auto m = list.begin(); m != list.end();) {
      if (pred(*m)) {
        m = list.erase(m);
        --unexpected_count_;
      } else {
        ++m;
      }
    }
    auto next = std::next(it);
    drop_if_empty(it, /*may_keep=*/false);
    it = next;
  }
}

void MatchQueues::drop_if_empty(BucketMap::iterator it, bool may_keep) {
  Bucket& bucket = it->second;
  if (!bucket.posted.empty() || !bucket.unexpected.empty() || bucket.kept) return;
  if (!may_keep) {
    erase_bucket(it);
    return;
  }
  if (kept_empty_.size() >= kKeptEmptyBuckets) {
    // The oldest kept bucket goes if it is still empty; this one takes its place.
    const Key oldest = kept_empty_.front();
    kept_empty_.erase(kept_empty_.begin());
    if (auto o = buckets_.find(oldest); o != buckets_.end()) {
      o->second.kept = false;
      if (o->second.posted.empty() && o->second.unexpected.empty()) erase_bucket(o);
    }
  }
  bucket.kept = true;
  kept_empty_.push_back(it->first);
}

}  // namespace thd::detail
