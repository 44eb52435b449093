// Per-thread free lists of fixed-size blocks for the objects every op makes on the
// master and the release of its result frees again: the result's Handle and its
// metadata mirror's storage. An op reuses the blocks earlier ops' released results
// left, without the heap. A block freed on another thread joins that thread's list;
// a list keeps at most kMaxFree blocks (the rest go back to the heap), and a
// thread's list goes back to the heap when the thread ends.
#pragma once

#include <cstddef>
#include <memory>
#include <new>

namespace thd::master {

// Under AddressSanitizer every block goes back to the heap at once, so a handle
// used after its release is reported instead of reading a reused block.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kPoolBlocks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kPoolBlocks = false;
#else
inline constexpr bool kPoolBlocks = true;
#endif
#else
inline constexpr bool kPoolBlocks = true;
#endif

template <size_t Size, size_t Align>
class BlockPool {
 public:
  static constexpr size_t kMaxFree = 256;

  static void* allocate() {
    if constexpr (!kPoolBlocks) return heap_allocate();
    List& l = list();
    if (Node* n = l.head) {
      l.head = n->next;
      --l.count;
      return n;
    }
    return heap_allocate();
  }

  static void deallocate(void* p) {
    if constexpr (!kPoolBlocks) return heap_deallocate(p);
    // After this thread's list is gone (a block freed by a later thread-local
    // destructor), blocks go straight back to the heap.
    if (!exited()) {
      List& l = list();
      if (l.count < kMaxFree) {
        l.head = new (p) Node{l.head};
        ++l.count;
        return;
      }
    }
    heap_deallocate(p);
  }

 private:
  // The default alignment takes malloc's fast path; over-aligned blocks the aligned one.
  static void* heap_allocate() {
    if constexpr (Align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) return ::operator new(Size);
    else return ::operator new(Size, std::align_val_t{Align});
  }
  static void heap_deallocate(void* p) {
    if constexpr (Align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) ::operator delete(p);
    else ::operator delete(p, std::align_val_t{Align});
  }

  struct Node {
    Node* next;
  };
  static_assert(Size >= sizeof(Node) && Align >= alignof(Node));
  struct List {
    Node* head = nullptr;
    size_t count = 0;
    ~List() {
      exited() = true;
      while (head != nullptr) {
        Node* n = head;
        head = n->next;
        heap_deallocate(n);
      }
    }
  };
  static List& list() {
    thread_local List l;
    return l;
  }
  // Trivially destructible, so it can still be read after the list is destroyed.
  static bool& exited() {
    thread_local bool e = false;
    return e;
  }
};

// An allocator over BlockPool for std::allocate_shared: the block holds the
// control block and the object together.
template <typename T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) {}  // NOLINT: rebinding is implicit

  T* allocate(size_t n) {
    if (n != 1) return std::allocator<T>().allocate(n);
    return static_cast<T*>(BlockPool<sizeof(T), alignof(T)>::allocate());
  }
  void deallocate(T* p, size_t n) {
    if (n != 1) return std::allocator<T>().deallocate(p, n);
    BlockPool<sizeof(T), alignof(T)>::deallocate(p);
  }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const {
    return true;
  }
};

}  // namespace thd::master
