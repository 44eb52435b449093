// A worker's tensors of one session, by the ids the master assigned. An entry is a
// tensor or the poison of the op that should have produced it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

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
class HandleTable {
 public:
  // nullptr when the id is not live.
  const Entry* find(uint64_t id) const;
  // Whether the id is live; an id above every id the table ever held is answered
  // without the lock (the master's ids grow, so a new op's output usually is one).
  bool live(uint64_t id) const;
  // ValueError when the id is 0 or already live (the master never reuses ids).
  void define(uint64_t id, Tensor tensor);
  // A graph's replay: `id` holds `tensor` from now on, whatever it held (a tensor
  // of the previous replay, a poison) or whether it was live.
  void assign(uint64_t id, Tensor tensor);
  void poison(uint64_t id, std::shared_ptr<const Poison> poison);
  // Removes the entry, moving its tensor (undefined for a poison) to `out`: the
  // caller releases it, outside the table's lock. False when the id was not live.
  bool take(uint64_t id, Tensor& out);
  size_t size() const;
  void clear();
  // Bytes of tensor memory the live entries hold (each storage counted once).
  size_t storage_bytes() const;
  // How many times an entry was erased (take, clear): an entry's address taken
  // when this read n stays valid while it still reads n (a graph's replays keep the
  // addresses of the entries they use, worker/graphs.h).
  uint64_t erasures() const { return erasures_.load(std::memory_order_acquire); }

 private:
  // Records `id` as held (under mu_).
  void note_id(uint64_t id) {
    if (id > max_id_.load(std::memory_order_relaxed)) max_id_.store(id, std::memory_order_release);
  }

  mutable std::mutex mu_;
  std::atomic<uint64_t> erasures_{0};
  std::atomic<uint64_t> max_id_{0};  // the highest id ever held
  std::unordered_map<uint64_t, Entry> entries_;
};

}  // namespace thd::worker
