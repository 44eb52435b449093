#include "datachannel/tcp/matching.h"

#include <thd/datachannel.h>

namespace thd::detail::tcp {

std::optional<PostedRecv> MatchQueues::take_posted(int source, const Envelope& envelope) {
  auto it = buckets_.find(key_of(envelope));
  if (it == buckets_.end()) return std::nullopt;
  auto& posted = it->second.posted;
  std::optional<PostedRecv> found;
  for (auto r = posted.begin(); r != posted.end();) {
    if (r->request->finished()) {
      posted_keys_.erase(r->request.get());
      r = posted.erase(r);
      continue;
    }
    if (r->source == source || r->source == kAnySource) {
      found = std::move(*r);
      posted_keys_.erase(found->request.get());
      posted.erase(r);
      break;
    }
    ++r;
  }
  drop_if_empty(it);
  return found;
}

void MatchQueues::post(PostedRecv recv) {
  const Key key = key_of(recv.envelope);
  posted_keys_[recv.request.get()] = key;
  buckets_[key].posted.push_back(std::move(recv));
}

std::optional<PostedRecv> MatchQueues::withdraw(const RequestState* request) {
  auto k = posted_keys_.find(request);
  if (k == posted_keys_.end()) return std::nullopt;
  auto it = buckets_.find(k->second);
  posted_keys_.erase(k);
  if (it == buckets_.end()) return std::nullopt;
  auto& posted = it->second.posted;
  std::optional<PostedRecv> found;
  for (auto r = posted.begin(); r != posted.end(); ++r) {
    if (r->request.get() == request) {
      found = std::move(*r);
      posted.erase(r);
      break;
    }
  }
  drop_if_empty(it);
  return found;
}

std::vector<PostedRecv> MatchQueues::withdraw_if(const std::function<bool(const PostedRecv&)>& pred) {
  std::vector<PostedRecv> out;
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    auto& posted = it->second.posted;
    for (auto r = posted.begin(); r != posted.end();) {
      if (pred(*r)) {
        posted_keys_.erase(r->request.get());
        out.push_back(std::move(*r));
        r = posted.erase(r);
      } else {
        ++r;
      }
    }
    auto next = std::next(it);
    drop_if_empty(it);
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
    drop_if_empty(it);
    it = next;
  }
}

void MatchQueues::drop_if_empty(std::unordered_map<Key, Bucket, KeyHash>::iterator it) {
  if (it->second.posted.empty() && it->second.unexpected.empty()) buckets_.erase(it);
}

}  // namespace thd::detail::tcp
