// An allocator that keeps a few freed blocks per thread for the next allocation
// of the same type. Point-to-point requests are made and dropped once per message;
// with std::allocate_shared this turns their malloc/free pair into a pointer swap.
#pragma once

#include <cstddef>
#include <memory>

namespace thd::detail {

template <typename T>
class RecyclingAllocator {
 public:
  using value_type = T;

  RecyclingAllocator() noexcept = default;
  template <typename U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {}  // NOLINT: rebinding, as std::allocator

  T* allocate(size_t n) {
    if (n == 1) {
      if (void* block = spares().pop()) return static_cast<T*>(block);
    }
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n == 1 && spares().push(p)) return;
    std::allocator<T>().deallocate(p, n);
  }

  template <typename U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }

 private:
  // Blocks freed on a thread serve that thread's next allocations. A thread that
  // only frees (a progress thread finishing others' requests) keeps at most
  // kMaxSpares; the rest go back to the heap.
  struct Spares {
    static constexpr int kMaxSpares = 64;
    struct Block {
      Block* next;
    };
    static_assert(sizeof(T) >= sizeof(Block) && alignof(T) >= alignof(Block),
                  "a spare block holds a pointer: T must be at least pointer-sized and -aligned");
    Block* head = nullptr;
    int count = 0;
    // Set by the destructor: a block freed later in the thread's exit (by another
    // thread_local's destructor) goes back to the heap instead of to a dead list.
    bool closed = false;

    void* pop() noexcept {
      Block* b = head;
      if (b == nullptr) return nullptr;
      head = b->next;
      --count;
      return b;
    }
    bool push(T* p) noexcept {
      if (closed || count >= kMaxSpares) return false;
      Block* b = reinterpret_cast<Block*>(p);
      b->next = head;
      head = b;
      ++count;
      return true;
    }
    ~Spares() {
      closed = true;
      while (void* b = pop()) std::allocator<T>().deallocate(static_cast<T*>(b), 1);
    }
  };
  static Spares& spares() noexcept {
    thread_local Spares s;
    return s;
  }
};

}  // namespace thd::detail
