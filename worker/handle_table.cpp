#include "worker/handle_table.h"

#include <thread>

#include "tensor/check.h"

namespace thd::worker {

HandleTable::HandleTable() : window_(std::make_unique<std::atomic<Block*>[]>(kWindowBlocks)) {}

HandleTable::~HandleTable() = default;

HandleTable::Slot* HandleTable::slot_of(uint64_t id, Page** page) const {
  if (id == 0 || id == kClaiming) return nullptr;
  Block* b = window_[window_index(id)].load(std::memory_order_acquire);
  if (b == nullptr || b->number.load(std::memory_order_relaxed) != block_number(id)) return nullptr;
  Page* p = b->pages[page_index(id)].load(std::memory_order_acquire);
  if (p == nullptr) return nullptr;
  Slot& s = p->slots[slot_index(id)];
  // A stale block or page (unlinked, maybe reused for other ids meanwhile) holds
  // other ids in its slots: the id itself decides.
  if (s.id.load(std::memory_order_acquire) != id) return nullptr;
  if (page != nullptr) *page = p;
  return &s;
}

const Entry* HandleTable::find(uint64_t id) const {
  if (Slot* s = slot_of(id, nullptr)) return &s->entry;
  if (outside_size_.load(std::memory_order_acquire) == 0) return nullptr;
  return find_outside(id);
}

const Entry* HandleTable::find_outside(uint64_t id) const {
  std::lock_guard lock(outside_mu_);
  auto it = outside_.find(id);
  return it == outside_.end() ? nullptr : it->second.get();
}

bool HandleTable::try_pin(Page* p) {
  uint32_t pins = p->pins.load(std::memory_order_acquire);
  while (pins != kRetired) {
    if (p->pins.compare_exchange_weak(pins, pins + 1, std::memory_order_acq_rel)) return true;
  }
  return false;
}

HandleTable::Page* HandleTable::pin(uint64_t id) {
  Block* b = window_[window_index(id)].load(std::memory_order_acquire);
  if (b != nullptr && b->number.load(std::memory_order_relaxed) == block_number(id)) {
    Page* p = b->pages[page_index(id)].load(std::memory_order_acquire);
    if (p != nullptr && try_pin(p)) {
      // Once pinned it cannot be reused, so its number is settled.
      if (p->number.load(std::memory_order_relaxed) == page_number(id)) return p;
      unpin(p);
    }
  }
  // No page, or one being unlinked (link() waits for that under the lock).
  return link(id);
}

namespace {

// A spare from `spares`, or a new one `owned` keeps. The spares keep room for every
// one made, so that unlinking one (under the table's lock) never allocates.
template <typename T>
T* reuse_or_make(std::vector<std::unique_ptr<T>>& owned, std::vector<T*>& spares) {
  if (spares.empty()) {
    owned.push_back(std::make_unique<T>());
    spares.reserve(owned.size());
    return owned.back().get();
  }
  T* t = spares.back();
  spares.pop_back();
  return t;
}

}  // namespace

HandleTable::Page* HandleTable::link(uint64_t id) {
  std::lock_guard lock(mu_);
  std::atomic<Block*>& place = window_[window_index(id)];
  Block* b = place.load(std::memory_order_relaxed);
  if (b == nullptr) {
    b = reuse_or_make(blocks_, free_blocks_);
    b->number.store(block_number(id), std::memory_order_relaxed);
    b->linked = 0;
    place.store(b, std::memory_order_release);
  } else if (b->number.load(std::memory_order_relaxed) != block_number(id)) {
    return nullptr;
  }
  std::atomic<Page*>& page_place = b->pages[page_index(id)];
  if (Page* p = page_place.load(std::memory_order_relaxed)) {
    // Linked pages are never retired outside this lock, so this one is not.
    if (try_pin(p)) return p;
  }
  Page* p = reuse_or_make(pages_, free_pages_);
  p->number.store(page_number(id), std::memory_order_relaxed);
  p->pins.store(1, std::memory_order_relaxed);
  page_place.store(p, std::memory_order_release);
  ++b->linked;
  if (newest_page_ == nullptr || page_number(id) > newest_.load(std::memory_order_relaxed)) {
    // The page new ids went to until now is left to the ids still live in it.
    Page* previous = newest_page_;
    newest_page_ = p;
    newest_.store(page_number(id), std::memory_order_release);
    if (previous != nullptr) retire_locked(previous);
  }
  return p;
}

void HandleTable::unpin(Page* p) {
  if (p->pins.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // The newest page stays while empty: a program's loop frees its previous result
  // before it makes the next one, often the only entry of that page.
  if (p->number.load(std::memory_order_relaxed) >= newest_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(mu_);
  retire_locked(p);
}

void HandleTable::retire_locked(Page* p) {
  // Someone may have pinned it since its count reached 0, or retired it.
  uint32_t zero = 0;
  if (!p->pins.compare_exchange_strong(zero, kRetired, std::memory_order_acq_rel)) return;
  const uint64_t first = p->number.load(std::memory_order_relaxed) << kPageBits;
  std::atomic<Block*>& place = window_[window_index(first)];
  Block* b = place.load(std::memory_order_relaxed);
  b->pages[page_index(first)].store(nullptr, std::memory_order_release);
  free_pages_.push_back(p);  // reserved when the page was made
  if (--b->linked == 0) {
    place.store(nullptr, std::memory_order_release);
    free_blocks_.push_back(b);  // reserved when the block was made
  }
}

HandleTable::Slot* HandleTable::claim(uint64_t id, Slot** existing, bool* outside) {
  *existing = nullptr;
  *outside = false;
  Page* p = id == kClaiming ? nullptr : pin(id);
  if (p == nullptr) {
    *outside = true;
    return nullptr;
  }
  Slot& s = p->slots[slot_index(id)];
  uint64_t held = 0;
  while (!s.id.compare_exchange_weak(held, kClaiming, std::memory_order_acq_rel)) {
    if (held == id) {
      unpin(p);  // the live entry holds a pin of its own
      *existing = &s;
      return nullptr;
    }
    // Another thread writes this id (a master that sent it twice): wait until it is
    // published, then it is the live entry.
    if (held == kClaiming) std::this_thread::yield();
    held = 0;
  }
  return &s;
}

void HandleTable::put(uint64_t id, Entry entry, bool must_be_new) {
  auto in_use = [&] {
    THD_THROW(ValueError, "define", "tensor id {} is already in use (the master never reuses an id)", id);
  };
  if (outside_size_.load(std::memory_order_acquire) != 0) {
    std::lock_guard lock(outside_mu_);
    if (auto it = outside_.find(id); it != outside_.end()) {
      if (must_be_new) in_use();
      *it->second = std::move(entry);
      return;
    }
  }
  Slot* existing = nullptr;
  bool outside = false;
  if (Slot* s = claim(id, &existing, &outside)) {
    s->entry = std::move(entry);
    size_.fetch_add(1, std::memory_order_relaxed);
    s->id.store(id, std::memory_order_release);
    return;
  }
  if (existing != nullptr) {
    if (must_be_new) in_use();
    Entry previous = std::move(existing->entry);
    existing->entry = std::move(entry);
    return;
  }
  std::lock_guard lock(outside_mu_);
  auto [it, inserted] = outside_.try_emplace(id);
  if (!inserted) {
    if (must_be_new) in_use();
    *it->second = std::move(entry);
    return;
  }
  it->second = std::make_unique<Entry>(std::move(entry));
  size_.fetch_add(1, std::memory_order_relaxed);
  outside_size_.fetch_add(1, std::memory_order_release);
}

void HandleTable::define(uint64_t id, Tensor tensor) {
  if (id == 0) THD_THROW(ValueError, "define", "tensor id 0 is reserved for \"no tensor\"");
  if (outside_size_.load(std::memory_order_acquire) == 0) {
    // Every op's result: straight into its slot, without put()'s Entry in between.
    Slot* existing = nullptr;
    bool outside = false;
    if (Slot* s = claim(id, &existing, &outside)) {
      s->entry.tensor = std::move(tensor);
      size_.fetch_add(1, std::memory_order_relaxed);
      s->id.store(id, std::memory_order_release);
      return;
    }
    if (existing != nullptr) {
      THD_THROW(ValueError, "define", "tensor id {} is already in use (the master never reuses an id)", id);
    }
  }
  put(id, Entry{std::move(tensor), nullptr}, /*must_be_new=*/true);
}

void HandleTable::assign(uint64_t id, Tensor tensor) {
  if (id == 0) THD_THROW(ValueError, "define", "tensor id 0 is reserved for \"no tensor\"");
  put(id, Entry{std::move(tensor), nullptr}, /*must_be_new=*/false);
}

void HandleTable::poison(uint64_t id, std::shared_ptr<const Poison> poison) {
  if (id == 0) return;
  put(id, Entry{Tensor(), std::move(poison)}, /*must_be_new=*/false);
}

bool HandleTable::take(uint64_t id, Tensor& out) {
  Page* p = nullptr;
  Slot* s = slot_of(id, &p);
  // Claimed first, so two frees of one id (a master's bug) cannot both take it.
  uint64_t held = id;
  if (s != nullptr && s->id.compare_exchange_strong(held, kClaiming, std::memory_order_acq_rel)) {
    out = std::move(s->entry.tensor);
    s->entry.poison.reset();
    s->id.store(0, std::memory_order_release);
    size_.fetch_sub(1, std::memory_order_relaxed);
    erasures_.fetch_add(1, std::memory_order_acq_rel);
    unpin(p);
    return true;
  }
  if (outside_size_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard lock(outside_mu_);
  auto it = outside_.find(id);
  if (it == outside_.end()) return false;
  out = std::move(it->second->tensor);
  outside_.erase(it);
  outside_size_.fetch_sub(1, std::memory_order_release);
  size_.fetch_sub(1, std::memory_order_relaxed);
  erasures_.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

}  // namespace thd::worker
