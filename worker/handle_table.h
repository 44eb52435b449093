// A worker's tensors of one session, by the ids the master assigned. An entry is a
// tensor or the poison of the op that should have produced it.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <thd/error.h>
#include <thd/tensor.h>

namespace thd::worker {

// The original failure a poisoned tensor carries: ops that consume it are poisoned
// with the same record, so the master raises the error where it began.
struct Poison {
  uint64_t op_id = 0;
  std::string op_name;
  std::string message;
  int node = -1;
  ErrorKind kind = ErrorKind::Generic;  // of the exception the op failed with
  // The graph and the replay of it the op ran in (docs/graphs.md); 0: none.
  uint64_t graph = 0;
  uint64_t replay = 0;
};

struct Entry {
  Tensor tensor;                         // defined unless poisoned
  std::shared_ptr<const Poison> poison;  // set when poisoned
};

// Thread-safe: the node's streams run ops at once. An entry's address stays valid
// until the entry is erased (frees wait until the ops issued before them have run).
//
// The master's ids grow from 1, so the table is indexed by the id itself, not
// hashed: pages of kPageSlots entries, each page found through a block of
// kBlockPages page pointers, each block through a window of kWindowBlocks block
// pointers indexed by the id's high bits modulo the window. Looking an id up, and
// defining or erasing one in a page that exists, takes no lock: a slot holds its id
// in an atomic, published after its entry is written, and a reader checks it. Pages
// and blocks are made, and unlinked once empty (the newest page only once a newer
// one is made), under a lock: once per kPageSlots ids when ids come in order.
// Unlinked ones are kept for reuse until the table
// goes, never freed, so a reader holding a stale pointer reads memory that is still
// a page (whose slots then hold other ids). An id whose window slot is held by a
// block of other ids (live tensors more than the window's span of ids apart) goes
// to a small map under a lock instead.
class HandleTable {
 public:
  HandleTable();
  ~HandleTable();
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  // nullptr when the id is not live.
  const Entry* find(uint64_t id) const;
  bool live(uint64_t id) const { return find(id) != nullptr; }
  // ValueError when the id is 0 or already live (the master never reuses ids).
  void define(uint64_t id, Tensor tensor);
  // A graph's replay: `id` holds `tensor` from now on, whatever it held (a tensor
  // of the previous replay, a poison) or whether it was live.
  void assign(uint64_t id, Tensor tensor);
  void poison(uint64_t id, std::shared_ptr<const Poison> poison);
  // Removes the entry, moving its tensor (undefined for a poison) to `out`: the
  // caller releases it. False when the id was not live.
  bool take(uint64_t id, Tensor& out);
  size_t size() const { return size_.load(std::memory_order_relaxed); }
  // How many times an entry was erased (take): an entry's address taken when this
  // read n stays valid while it still reads n (a graph's replays keep the addresses
  // of the entries they use, worker/graphs.h).
  uint64_t erasures() const { return erasures_.load(std::memory_order_acquire); }

  static constexpr unsigned kPageBits = 8;
  static constexpr unsigned kBlockBits = 12;
  static constexpr unsigned kWindowBits = 14;
  static constexpr uint64_t kPageSlots = uint64_t{1} << kPageBits;
  static constexpr uint64_t kBlockPages = uint64_t{1} << kBlockBits;
  static constexpr uint64_t kWindowBlocks = uint64_t{1} << kWindowBits;
  // Ids this far apart share a window slot: the span of ids the window holds.
  static constexpr uint64_t kWindowSpan = uint64_t{1} << (kPageBits + kBlockBits + kWindowBits);
  // How many live ids the map of ids outside the window holds (for tests).
  size_t outside_window() const { return outside_size_.load(std::memory_order_relaxed); }

 private:
  // A slot's id while its entry is being written: never an id in the window (slot
  // index 255 of a page holds ids whose low bits are all ones; this one goes to the
  // map, see placed()).
  static constexpr uint64_t kClaiming = ~uint64_t{0};
  static constexpr uint32_t kRetired = ~uint32_t{0};

  struct Slot {
    std::atomic<uint64_t> id{0};  // 0: empty
    Entry entry;
  };
  struct Page {
    // Live slots, plus callers about to write one; kRetired once unlinked.
    std::atomic<uint32_t> pins{0};
    std::atomic<uint64_t> number{0};  // id >> kPageBits of its ids
    std::array<Slot, kPageSlots> slots;
  };
  struct Block {
    std::atomic<uint64_t> number{0};  // id >> (kPageBits + kBlockBits) of its ids
    uint32_t linked = 0;              // pages linked (under mu_)
    std::array<std::atomic<Page*>, kBlockPages> pages{};
  };

  static uint64_t page_number(uint64_t id) { return id >> kPageBits; }
  static uint64_t block_number(uint64_t id) { return id >> (kPageBits + kBlockBits); }
  static size_t window_index(uint64_t id) { return block_number(id) & (kWindowBlocks - 1); }
  static size_t page_index(uint64_t id) { return page_number(id) & (kBlockPages - 1); }
  static size_t slot_index(uint64_t id) { return id & (kPageSlots - 1); }

  // The slot holding `id` live, through the window (no lock); nullptr otherwise.
  Slot* slot_of(uint64_t id, Page** page) const;
  // Pins the page of `id`, linking one (and its block) when there is none; nullptr
  // when the id's window slot holds a block of other ids.
  Page* pin(uint64_t id);
  Page* link(uint64_t id);
  static bool try_pin(Page* p);
  void unpin(Page* p);
  // Unlinks an empty page (under mu_); nothing when it is pinned again, or unlinked.
  void retire_locked(Page* p);
  // Where a new id goes: its slot, made live (pinned) but not yet published (its id
  // reads kClaiming); null when the id is already live (`existing` then set when it
  // is in the window) or goes to the map (`outside`).
  Slot* claim(uint64_t id, Slot** existing, bool* outside);
  // Writes `entry` to `id`: a new entry when `must_be_new`, else over the live one.
  void put(uint64_t id, Entry entry, bool must_be_new);
  // Ids the window cannot hold: the map, under outside_mu_.
  const Entry* find_outside(uint64_t id) const;

  mutable std::mutex mu_;  // links and unlinks pages and blocks
  std::unique_ptr<std::atomic<Block*>[]> window_;
  std::vector<std::unique_ptr<Page>> pages_;    // every page made (under mu_)
  std::vector<std::unique_ptr<Block>> blocks_;  // every block made (under mu_)
  std::vector<Page*> free_pages_;               // unlinked, for reuse (under mu_)
  std::vector<Block*> free_blocks_;             // unlinked, for reuse (under mu_)
  // The page of the highest page number linked: kept while empty (under mu_).
  Page* newest_page_ = nullptr;
  std::atomic<uint64_t> newest_{0};  // its number

  mutable std::mutex outside_mu_;
  std::unordered_map<uint64_t, std::unique_ptr<Entry>> outside_;
  std::atomic<size_t> outside_size_{0};

  std::atomic<size_t> size_{0};
  std::atomic<uint64_t> erasures_{0};
};

}  // namespace thd::worker
