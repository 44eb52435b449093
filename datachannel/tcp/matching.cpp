#include "datachannel/tcp/matching.h"

#include <thd/datachannel.h>

namespace thd::detail::tcp {

namespace {
// How many finished receives' nodes, and how many empty buckets, are kept.
constexpr size_t kSpareNodes = 64;
constexpr size_t kKeptEmptyBuckets = 8;
}  // namespace

PostedRecv MatchQueues::take_out(std::list<PostedRecv>& posted, std::list<PostedRecv>::iterator r) {
  PostedRecv out = std::move(*r);  // the node kept below holds no request
  if (auto k = posted_keys_.find(out.request.get()); k != posted_keys_.end()) {
    KeyMap::node_type node = posted_keys_.extract(k);
    if (spare_keys_.size() < kSpareNodes) spare_keys_.push_back(std::move(node));
  }
  if (spare_posted_.size() < kSpareNodes) {
    spare_posted_.splice(spare_posted_.end(), posted, r);
  } else {
    posted.erase(r);
  }
  return out;
}

std::optional<PostedRecv> MatchQueues::take_posted(int source, const Envelope& envelope) {
  auto it = buckets_.find(key_of(envelope));
  if (it == buckets_.end()) return std::nullopt;
  auto& posted = it->second.posted;
  std::optional<PostedRecv> found;
  for (auto r = posted.begin(); r != posted.end();) {
    if (r->request->finished()) {
      take_out(posted, r++);
      continue;
    }
    if (r->source == source || r->source == kAnySource) {
      found = take_out(posted, r);
      break;
    }
    ++r;
  }
  drop_if_empty(it);
  return found;
}

void MatchQueues::post(PostedRecv recv) {
  const Key key = key_of(recv.envelope);
  if (spare_keys_.empty()) {
    posted_keys_[recv.request.get()] = key;
  } else {
    KeyMap::node_type node = std::move(spare_keys_.back());
    spare_keys_.pop_back();
    node.key() = recv.request.get();
    node.mapped() = key;
    posted_keys_.insert(std::move(node));
  }
  auto& posted = buckets_[key].posted;
  if (spare_posted_.empty()) {
    posted.push_back(std::move(recv));
  } else {
    posted.splice(posted.end(), spare_posted_, spare_posted_.begin());
    posted.back() = std::move(recv);
  }
}

std::optional<PostedRecv> MatchQueues::withdraw(const RequestState* request) {
  auto k = posted_keys_.find(request);
  if (k == posted_keys_.end()) return std::nullopt;
  auto it = buckets_.find(k->second);
  if (it == buckets_.end()) {
    posted_keys_.erase(k);
    return std::nullopt;
  }
  auto& posted = it->second.posted;
  std::optional<PostedRecv> found;
  for (auto r = posted.begin(); r != posted.end(); ++r) {
    if (r->request.get() == request) {
      found = take_out(posted, r);
      break;
    }
  }
  if (!found) posted_keys_.erase(request);
  drop_if_empty(it);
  return found;
}

std::vector<PostedRecv> MatchQueues::withdraw_if(const std::function<bool(const PostedRecv&)>& pred) {
  std::vector<PostedRecv> out;
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
  auto it = buckets_.find(key_of(envelope));
  if (it == buckets_.end()) return nullptr;
  for (auto& m : it->second.unexpected) {
    if (source == kAnySource || m.source == source) return &m;
  }
  return nullptr;
}

UnexpectedMessage* MatchQueues::add_unexpected(UnexpectedMessage message) {
  auto& list = buckets_[key_of(message.header.envelope)].unexpected;
  list.push_back(std::move(message));
  ++unexpected_count_;
  return &list.back();
}

void MatchQueues::erase_unexpected(const UnexpectedMessage* message) {
  auto it = buckets_.find(key_of(message->header.envelope));
  if (it == buckets_.end()) return;
  auto& list = it->second.unexpected;
  for (auto m = list.begin(); m != list.end(); ++m) {
    if (&*m == message) {
      list.erase(m);
      --unexpected_count_;
      break;
    }
  }
  drop_if_empty(it);
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
    buckets_.erase(it);
    return;
  }
  if (kept_empty_.size() >= kKeptEmptyBuckets) {
    // The oldest kept bucket goes if it is still empty; this one takes its place.
    const Key oldest = kept_empty_.front();
    kept_empty_.erase(kept_empty_.begin());
    if (auto o = buckets_.find(oldest); o != buckets_.end()) {
      o->second.kept = false;
      if (o->second.posted.empty() && o->second.unexpected.empty()) buckets_.erase(o);
    }
  }
  bucket.kept = true;
  kept_empty_.push_back(it->first);
}

}  // namespace thd::detail::tcp
