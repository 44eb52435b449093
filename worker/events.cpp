#include "worker/events.h"

#include <algorithm>

namespace thd::worker {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(EventState::Clock::now().time_since_epoch()).count();
}

// How often a waiter looks at its stop condition.
constexpr std::chrono::milliseconds kStopCheck{20};

void take_due(std::vector<std::pair<uint64_t, EventState::Callback>>& from, uint64_t generation,
              std::vector<std::pair<uint64_t, EventState::Callback>>& into) {
  for (auto it = from.begin(); it != from.end();) {
    if (it->first <= generation) {
      into.push_back(std::move(*it));
      it = from.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace

uint64_t EventState::issue() {
  std::lock_guard lock(mu_);
  return ++issued_;
}

uint64_t EventState::issued() const {
  std::lock_guard lock(mu_);
  return issued_;
}

std::vector<std::function<void()>> EventState::complete(uint64_t generation, uint32_t stream,
                                                        std::shared_ptr<const Poison> poison,
                                                        std::shared_ptr<const streams::VectorClock> clock,
                                                        int64_t time_ns) {
  std::vector<std::pair<uint64_t, Callback>> due;
  std::vector<std::pair<uint64_t, Callback>> now;
  Record record;
  {
    std::lock_guard lock(mu_);
    if (generation <= latest_.generation) return {};  // a later record completed first
    latest_ = Record{generation, time_ns != 0 ? time_ns : now_ns(), std::move(poison), std::move(clock), stream};
    record = latest_;
    take_due(callbacks_, generation, due);
    take_due(at_record_, generation, now);
  }
  for (auto& [g, fn] : now) fn(record);
  cv_.notify_all();
  std::vector<std::function<void()>> calls;
  calls.reserve(due.size());
  for (auto& [g, fn] : due) calls.push_back([fn = std::move(fn), record] { fn(record); });
  return calls;
}

bool EventState::wait(uint64_t generation, Clock::time_point deadline, const std::function<bool()>& stop) const {
  std::unique_lock lock(mu_);
  while (latest_.generation < generation) {
    if (stop && stop()) return false;
    const auto next = std::min(deadline, Clock::now() + kStopCheck);
    cv_.wait_until(lock, next);
    if (latest_.generation < generation && Clock::now() >= deadline) return false;
  }
  return true;
}

EventState::Record EventState::latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

void EventState::when_complete(uint64_t generation, Callback fn) { call_or_keep(callbacks_, generation, std::move(fn)); }

void EventState::at_record(uint64_t generation, Callback fn) { call_or_keep(at_record_, generation, std::move(fn)); }

void EventState::call_or_keep(std::vector<std::pair<uint64_t, Callback>>& into, uint64_t generation, Callback fn) {
  Record record;
  {
    std::lock_guard lock(mu_);
    if (latest_.generation < generation) {
      into.emplace_back(generation, std::move(fn));
      return;
    }
    record = latest_;
  }
  fn(record);
}

std::shared_ptr<EventState> EventTable::get(uint64_t id) {
  std::lock_guard lock(mu_);
  auto& e = events_[id];
  if (!e) e = std::make_shared<EventState>();
  return e;
}

void EventTable::erase(uint64_t id) {
  std::lock_guard lock(mu_);
  events_.erase(id);
}

size_t EventTable::size() const {
  std::lock_guard lock(mu_);
  return events_.size();
}

void EventTable::clear() {
  std::lock_guard lock(mu_);
  events_.clear();
}

}  // namespace thd::worker
