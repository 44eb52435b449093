// Same-host doorbells for cross-node event waits (docs/streams.md, "Event notices
// between nodes of one host").
//
// A stream waiting for another node's event learns that the record ran from the
// EventNotice message the recording node sends over the DataChannel. On one host
// that message costs a loopback send (6-20 us on a small VM) and usually a thread
// wake-up before the waiting stream can go on. So each node of a session also has
// a board: a small shared-memory file of slots that a recording node on the same
// host writes a wait's tag into, right after the record ran and before it sends
// the message. The waiting stream polls its slot while it waits for the message,
// and goes on as soon as the slot says the record ran and did not fail. The
// message is still sent and received, afterwards, off the latency path, so
// everything the board does not carry (a failure's poison, the hazard checker's
// clock) still travels in it, and waits between hosts need no board at all.
//
// Slot `tag % kSlots` says which wait's record ran: tag + 1 (it ran cleanly) or
// -(tag + 1) (the notice carries more: read the message); 0 is silent. Eager waits
// have tags unique within a session; a graph's replays repeat theirs, and each wait
// takes its bell (clears the slot) when it goes on, so a slot never says "done" for
// a wait whose record has not run. Two waits in flight whose tags share a slot may
// overwrite each other's doorbell, and the one overwritten then simply waits for
// its message.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace thd::worker {

class NoticeBoard {
 public:
  static constexpr size_t kSlots = 4096;
  static constexpr size_t kBytes = kSlots * 16;  // the file's size: kSlots Slots

  enum class Doorbell : uint8_t {
    Silent,      // nothing yet for this tag
    Done,        // the record ran and did not fail: go on
    ReadNotice,  // the notice has more to say (a failure, a clock): receive it
  };

  // This node's board for `session` (created, readable and writable by this user
  // only), or null when the host gives none (no /dev/shm): the node's waits then
  // rely on the notice messages alone. First removes the boards of this user's
  // processes that are gone.
  static std::unique_ptr<NoticeBoard> create(uint64_t session, int node);
  // Another node's board, null when that node runs on another host (its board is
  // not here) or its file is not what a board of this user should be.
  static std::unique_ptr<NoticeBoard> open(uint64_t session, int node);
  // Unmaps the slots; the board's creator also removes its file.
  ~NoticeBoard();
  NoticeBoard(const NoticeBoard&) = delete;
  NoticeBoard& operator=(const NoticeBoard&) = delete;

  // Sets the slot and wakes whoever sleeps on it (wait_for).
  void ring(int64_t tag, Doorbell what) noexcept;
  Doorbell look(int64_t tag) const noexcept;
  // As look, and clears the slot when it holds `tag`'s bell: the waiter's answer is
  // taken. A graph's replays repeat a wait with the tag it was captured with, so a
  // bell left in the slot would answer the next replay's wait before its record ran.
  // Taking the next replay's ring along with this one's is harmless: that wait then
  // reads its message instead.
  Doorbell take(int64_t tag) noexcept;
  // Sleeps until `tag`'s slot is rung (for it or for a tag sharing the slot) or
  // `at_most` passes, then takes: for a waiter that has polled long enough. A
  // futex on the shared slot, so a ring wakes it without a message.
  Doorbell wait_for(int64_t tag, std::chrono::microseconds at_most) noexcept;

  // "/thd-notices-<session>-<node>-<pid>": the file under /dev/shm of `node`'s
  // board, made by process `pid`. The pid lets a later board remove the file of
  // one whose process died without removing it (a killed worker).
  static std::string name_of(uint64_t session, int node, int64_t pid);

 private:
  struct Slot {
    std::atomic<int64_t> bell;
    std::atomic<uint32_t> rings;     // the futex word: counts rings
    std::atomic<uint32_t> sleepers;  // waiters in wait_for: a ring wakes them
  };
  static_assert(sizeof(Slot) * kSlots == kBytes);

  NoticeBoard(Slot* slots, std::string name, bool owner) noexcept
      : slots_(slots), name_(std::move(name)), owner_(owner) {}
  Slot& slot(int64_t tag) const noexcept { return slots_[static_cast<uint64_t>(tag) % kSlots]; }

  Slot* slots_;
  std::string name_;
  bool owner_;
};

}  // namespace thd::worker
