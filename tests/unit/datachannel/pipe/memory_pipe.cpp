#include "memory_pipe.h"

#include <algorithm>
#include <cstring>

#include "datachannel/check.h"

namespace thd::test {

namespace {
std::exception_ptr lost_error(int rank, int peer) {
  return std::make_exception_ptr(
      PeerLost("memory fabric: rank " + std::to_string(peer) + " is lost", detail::context_at("memory", rank, peer,
                                                                                               __FILE__, __LINE__)));
}
}  // namespace

std::unique_ptr<MemoryPipe> MemoryFabric::make_pipe(int rank, uint32_t max_tag) {
  auto p = std::make_unique<MemoryPipe>(*this, rank, max_tag);
  std::lock_guard lock(mu_);
  pipes_[static_cast<size_t>(rank)] = p.get();
  return p;
}

MemoryPipe& MemoryFabric::pipe(int rank) {
  std::lock_guard lock(mu_);
  return *pipes_.at(static_cast<size_t>(rank));
}

void MemoryFabric::inject(int from, int to, uint32_t tag, std::vector<uint8_t> bytes) {
  std::lock_guard lock(mu_);
  deliver(from, to, tag, std::move(bytes));
}

void MemoryFabric::lose(int rank) {
  std::lock_guard lock(mu_);
  lost_[static_cast<size_t>(rank)] = true;
  for (int r = 0; r < size_; ++r) {
    Inbox& in = inboxes_[static_cast<size_t>(r)];
    for (auto& [key, queue] : in.posted) {
      if (key.first != rank && r != rank) continue;
      for (auto& recv : queue) in.done.push_back({recv.op, lost_error(r, key.first), 0});
      queue.clear();
    }
    if (pipes_[static_cast<size_t>(r)]) pipes_[static_cast<size_t>(r)]->wake();
  }
}

void MemoryFabric::deliver(int from, int to, uint32_t tag, std::vector<uint8_t> bytes) {
  const Key key{from, tag};
  inboxes_[static_cast<size_t>(to)].arrived[key].push_back({std::move(bytes)});
  match(to, key);
  if (pipes_[static_cast<size_t>(to)]) pipes_[static_cast<size_t>(to)]->wake();
}

void MemoryFabric::match(int rank, const Key& key) {
  Inbox& in = inboxes_[static_cast<size_t>(rank)];
  auto& arrived = in.arrived[key];
  auto& posted = in.posted[key];
  while (!arrived.empty() && !posted.empty()) {
    Message m = std::move(arrived.front());
    arrived.pop_front();
    PostedRecv r = posted.front();
    posted.pop_front();
    if (m.bytes.size() > r.into.size()) {
      in.done.push_back({r.op,
                         std::make_exception_ptr(ValueError("memory fabric: a " + std::to_string(m.bytes.size()) +
                                                            "-byte message for a " + std::to_string(r.into.size()) +
                                                            "-byte receive")),
                         0});
      continue;
    }
    if (!m.bytes.empty()) std::memcpy(r.into.data(), m.bytes.data(), m.bytes.size());
    in.done.push_back({r.op, nullptr, m.bytes.size()});
  }
}

void MemoryFabric::take_tagged(Inbox& in, const TaggedRecv& r, TaggedMessage& m) {
  *r.sender_tag = m.tag;
  const size_t n = std::min(m.bytes.size(), r.into.size());
  if (n > 0) std::memcpy(r.into.data(), m.bytes.data(), n);
  if (m.bytes.size() > r.into.size()) {
    in.done.push_back({r.op,
                       std::make_exception_ptr(ValueError("memory fabric: a " + std::to_string(m.bytes.size()) +
                                                          "-byte message for a " + std::to_string(r.into.size()) +
                                                          "-byte receive")),
                       m.bytes.size()});
    return;
  }
  in.done.push_back({r.op, nullptr, m.bytes.size()});
}

namespace {
constexpr uint64_t kNative = uint64_t{1} << 62;
constexpr uint64_t kDTypeBits = uint64_t{0xff} << 48;
constexpr uint64_t kSenderBits = uint64_t{0xffff} << 32;
}  // namespace

std::optional<uint64_t> MemoryPipe::native_tag(const detail::Envelope& e, int sender) const {
  if (e.context % 2 != 0 || e.context / 2 > 0xffff || e.tag < 0 || e.tag > 0xffff ||
      e.kind.op != detail::MessageOp::P2P || e.kind.root != -1 || e.kind.reduce != 0) {
    return std::nullopt;
  }
  return kNative | (uint64_t{e.kind.dtype} << 48) | (static_cast<uint64_t>(sender) << 32) |
         (uint64_t{e.context / 2} << 16) | static_cast<uint64_t>(e.tag);
}

detail::pipe::MessagePipe::NativeMatch MemoryPipe::native_match(const detail::Envelope& e, int source) const {
  const uint64_t tag = *native_tag(e, source == kAnySource ? 0 : source) & ~kDTypeBits;
  return {source == kAnySource ? tag & ~kSenderBits : tag, ~kDTypeBits & (source == kAnySource ? ~kSenderBits : ~0ULL)};
}

detail::pipe::MessagePipe::NativeOrigin MemoryPipe::native_origin(uint64_t tag) const {
  return {static_cast<int>((tag & kSenderBits) >> 32), static_cast<uint8_t>((tag & kDTypeBits) >> 48)};
}

void MemoryPipe::send_tagged(int peer, uint64_t tag, std::span<const uint8_t> data, detail::pipe::PipeOp* op) {
  std::lock_guard lock(fabric_.mu_);
  tagged_calls_.fetch_add(1);
  if (fabric_.lost_[static_cast<size_t>(peer)] || fabric_.lost_[static_cast<size_t>(rank())]) {
    fabric_.inboxes_[static_cast<size_t>(rank())].done.push_back({op, lost_error(rank(), peer), 0});
    return;
  }
  auto& in = fabric_.inboxes_[static_cast<size_t>(peer)];
  MemoryFabric::TaggedMessage m{tag, std::vector<uint8_t>(data.begin(), data.end())};
  auto r = std::find_if(in.tagged_posted.begin(), in.tagged_posted.end(),
                        [&](const auto& p) { return ((tag ^ p.tag) & p.mask) == 0; });
  if (r != in.tagged_posted.end()) {
    fabric_.take_tagged(in, *r, m);
    in.tagged_posted.erase(r);
  } else {
    in.tagged_arrived.push_back(std::move(m));
  }
  if (fabric_.pipes_[static_cast<size_t>(peer)]) fabric_.pipes_[static_cast<size_t>(peer)]->wake();
  fabric_.inboxes_[static_cast<size_t>(rank())].done.push_back({op, nullptr, data.size()});
}

void MemoryPipe::recv_tagged(int, uint64_t tag, uint64_t mask, std::span<uint8_t> data, uint64_t* sender_tag,
                             detail::pipe::PipeOp* op) {
  std::lock_guard lock(fabric_.mu_);
  tagged_calls_.fetch_add(1);
  auto& in = fabric_.inboxes_[static_cast<size_t>(rank())];
  MemoryFabric::TaggedRecv r{tag, mask, data, sender_tag, op};
  auto m = std::find_if(in.tagged_arrived.begin(), in.tagged_arrived.end(),
                        [&](const auto& a) { return ((a.tag ^ tag) & mask) == 0; });
  if (m != in.tagged_arrived.end()) {
    fabric_.take_tagged(in, r, *m);
    in.tagged_arrived.erase(m);
  } else {
    in.tagged_posted.push_back(r);
  }
}

std::optional<detail::pipe::MessagePipe::Probed> MemoryPipe::probe_tagged(uint64_t tag, uint64_t mask) {
  std::lock_guard lock(fabric_.mu_);
  for (const auto& a : fabric_.inboxes_[static_cast<size_t>(rank())].tagged_arrived) {
    if (((a.tag ^ tag) & mask) == 0) return Probed{a.tag, a.bytes.size()};
  }
  return std::nullopt;
}

MemoryPipe::~MemoryPipe() {
  std::lock_guard lock(fabric_.mu_);
  fabric_.pipes_[static_cast<size_t>(rank())] = nullptr;
  auto& in = fabric_.inboxes_[static_cast<size_t>(rank())];
  in.posted.clear();
  in.tagged_posted.clear();
  in.done.clear();
}

void MemoryPipe::send(int peer, uint32_t tag, std::span<const uint8_t> data, detail::pipe::PipeOp* op) {
  std::unique_lock lock(fabric_.mu_);
  calls_.push_back({true, peer, tag, data.size()});
  std::exception_ptr error;
  if (fabric_.lost_[static_cast<size_t>(peer)] || fabric_.lost_[static_cast<size_t>(rank())]) {
    error = lost_error(rank(), peer);
  } else {
    fabric_.deliver(rank(), peer, tag, std::vector<uint8_t>(data.begin(), data.end()));
  }
  const size_t sent = error ? 0 : data.size();
  if (sends_at_once_) {
    lock.unlock();
    op->done(std::move(error), sent);
    return;
  }
  fabric_.inboxes_[static_cast<size_t>(rank())].done.push_back({op, std::move(error), sent});
}

void MemoryPipe::recv(int peer, uint32_t tag, std::span<uint8_t> data, detail::pipe::PipeOp* op) {
  std::lock_guard lock(fabric_.mu_);
  calls_.push_back({false, peer, tag, data.size()});
  auto& in = fabric_.inboxes_[static_cast<size_t>(rank())];
  if (fabric_.lost_[static_cast<size_t>(peer)]) {
    in.done.push_back({op, lost_error(rank(), peer), 0});
    return;
  }
  in.posted[{peer, tag}].push_back({data, op});
  fabric_.match(rank(), {peer, tag});
}

bool MemoryPipe::cancel(detail::pipe::PipeOp* op) {
  std::lock_guard lock(fabric_.mu_);
  auto& tagged = fabric_.inboxes_[static_cast<size_t>(rank())].tagged_posted;
  if (auto it = std::find_if(tagged.begin(), tagged.end(), [&](const auto& r) { return r.op == op; });
      it != tagged.end()) {
    tagged.erase(it);
    return true;
  }
  for (auto& [key, queue] : fabric_.inboxes_[static_cast<size_t>(rank())].posted) {
    auto it = std::find_if(queue.begin(), queue.end(), [&](const auto& r) { return r.op == op; });
    if (it != queue.end()) {
      queue.erase(it);
      return true;
    }
  }
  return false;
}

int MemoryPipe::progress() {
  progress_calls_.fetch_add(1, std::memory_order_relaxed);
  std::vector<MemoryFabric::Done> done;
  {
    std::lock_guard lock(fabric_.mu_);
    done.swap(fabric_.inboxes_[static_cast<size_t>(rank())].done);
  }
  for (auto& d : done) d.op->done(d.error, d.bytes);
  return static_cast<int>(done.size());
}

bool MemoryPipe::arm() {
  std::lock_guard lock(fabric_.mu_);
  return fabric_.inboxes_[static_cast<size_t>(rank())].done.empty();
}

void MemoryPipe::sleep(net::Deadline until, bool) {
  std::unique_lock lock(sleep_mu_);
  sleepers_.fetch_add(1);
  sleep_cv_.wait_until(lock, until, [&] { return woken_ && !held_; });
  sleepers_.fetch_sub(1);
  if (!held_) woken_ = false;
}

void MemoryPipe::interrupt() noexcept {
  interrupts_.fetch_add(1);
  wake();
}

std::vector<MemoryPipe::Call> MemoryPipe::calls() {
  std::lock_guard lock(fabric_.mu_);
  return calls_;
}

void MemoryPipe::hold_wakeups(bool held) {
  {
    std::lock_guard lock(sleep_mu_);
    held_ = held;
  }
  sleep_cv_.notify_all();
}

void MemoryPipe::wake() {
  {
    std::lock_guard lock(sleep_mu_);
    woken_ = true;
  }
  sleep_cv_.notify_all();
}

std::exception_ptr MemoryPipe::peer_error(int peer) const {
  std::lock_guard lock(const_cast<std::mutex&>(fabric_.mu_));
  return fabric_.lost_[static_cast<size_t>(peer)] ? lost_error(rank(), peer) : nullptr;
}

}  // namespace thd::test
