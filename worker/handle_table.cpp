#include "worker/handle_table.h"

#include <unordered_set>

#include "tensor/check.h"

namespace thd::worker {

const Entry* HandleTable::find(uint64_t id) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

bool HandleTable::live(uint64_t id) const {
  // max_id_ is raised under mu_ before an entry becomes findable.
  if (id > max_id_.load(std::memory_order_acquire)) return false;
  return find(id) != nullptr;
}

void HandleTable::define(uint64_t id, Tensor tensor) {
  if (id == 0) THD_THROW(ValueError, "define", "tensor id 0 is reserved for \"no tensor\"");
  std::lock_guard lock(mu_);
  auto [it, inserted] = entries_.try_emplace(id);
  if (!inserted) {
    THD_THROW(ValueError, "define", "tensor id {} is already in use (the master never reuses an id)", id);
  }
  it->second = Entry{std::move(tensor), nullptr};
  note_id(id);
}

void HandleTable::assign(uint64_t id, Tensor tensor) {
  if (id == 0) THD_THROW(ValueError, "define", "tensor id 0 is reserved for \"no tensor\"");
  Tensor previous;  // released outside the lock
  std::lock_guard lock(mu_);
  Entry& e = entries_[id];
  previous = std::move(e.tensor);
  e = Entry{std::move(tensor), nullptr};
  note_id(id);
}

void HandleTable::poison(uint64_t id, std::shared_ptr<const Poison> poison) {
  if (id == 0) return;
  std::lock_guard lock(mu_);
  entries_[id] = Entry{Tensor(), std::move(poison)};
  note_id(id);
}

bool HandleTable::take(uint64_t id, Tensor& out) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  out = std::move(it->second.tensor);
  entries_.erase(it);
  erasures_.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

size_t HandleTable::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void HandleTable::clear() {
  std::lock_guard lock(mu_);
  entries_.clear();
  erasures_.fetch_add(1, std::memory_order_acq_rel);
}

size_t HandleTable::storage_bytes() const {
  std::lock_guard lock(mu_);
  std::unordered_set<const void*> seen;
  size_t total = 0;
  for (const auto& [id, e] : entries_) {
    if (!e.tensor.defined()) continue;
    if (seen.insert(e.tensor.storage().get()).second) total += e.tensor.storage()->nbytes();
  }
  return total;
}

}  // namespace thd::worker
