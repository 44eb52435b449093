// The same-host doorbells of cross-node event waits (worker/notice_board.h): what a
// ring on one mapping reads as on another, slots shared by tags, and the files a
// board refuses to use.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <thread>
#include <chrono>
#include <string>

#include "worker/notice_board.h"

namespace thd::worker {
namespace {

using Doorbell = NoticeBoard::Doorbell;

// A session id of its own per test: boards live in the host's /dev/shm, which
// tests running side by side share.
uint64_t fresh_session() { return std::random_device{}() * 0x100000001ULL ^ std::random_device{}(); }

TEST(NoticeBoard, ARingOnAPeersMappingIsSeenByTheBoardsOwner) {
  const uint64_t session = fresh_session();
  auto mine = NoticeBoard::create(session, 1);
  ASSERT_NE(mine, nullptr);
  auto theirs = NoticeBoard::open(session, 1);
  ASSERT_NE(theirs, nullptr);
  EXPECT_EQ(mine->look(0), Doorbell::Silent);
  EXPECT_EQ(mine->look(77), Doorbell::Silent);
  theirs->ring(77, Doorbell::Done);
  EXPECT_EQ(mine->look(77), Doorbell::Done);
  EXPECT_EQ(mine->look(78), Doorbell::Silent);
  theirs->ring(0, Doorbell::Done);  // tag 0 is a tag like any other, not an empty slot
  EXPECT_EQ(mine->look(0), Doorbell::Done);
  theirs->ring(90, Doorbell::ReadNotice);
  EXPECT_EQ(mine->look(90), Doorbell::ReadNotice);
  theirs->ring(91, Doorbell::Silent);  // says nothing
  EXPECT_EQ(mine->look(91), Doorbell::Silent);
}

// A graph's replays repeat a wait's tag: the bell one wait took must not answer
// the next before its own record rings.
TEST(NoticeBoard, AWaitTakesItsBellSoTheSameTagsNextWaitFindsTheSlotSilent) {
  const uint64_t session = fresh_session();
  auto mine = NoticeBoard::create(session, 1);
  ASSERT_NE(mine, nullptr);
  auto theirs = NoticeBoard::open(session, 1);
  ASSERT_NE(theirs, nullptr);
  theirs->ring(77, Doorbell::Done);
  EXPECT_EQ(mine->take(77), Doorbell::Done);
  EXPECT_EQ(mine->look(77), Doorbell::Silent);
  EXPECT_EQ(mine->take(77), Doorbell::Silent);
  theirs->ring(77, Doorbell::ReadNotice);
  EXPECT_EQ(mine->wait_for(77, std::chrono::microseconds(100)), Doorbell::ReadNotice);
  EXPECT_EQ(mine->look(77), Doorbell::Silent);
  // Another tag's bell in the same slot is left for its own wait.
  const auto other = static_cast<int64_t>(77 + NoticeBoard::kSlots);
  theirs->ring(other, Doorbell::Done);
  EXPECT_EQ(mine->take(77), Doorbell::Silent);
  EXPECT_EQ(mine->take(other), Doorbell::Done);
}

TEST(NoticeBoard, ATagSharingASlotNeverReadsAsRungForAnother) {
  const uint64_t session = fresh_session();
  auto mine = NoticeBoard::create(session, 0);
  ASSERT_NE(mine, nullptr);
  auto theirs = NoticeBoard::open(session, 0);
  ASSERT_NE(theirs, nullptr);
  const int64_t a = 5;
  const int64_t b = a + static_cast<int64_t>(NoticeBoard::kSlots);  // the same slot
  theirs->ring(a, Doorbell::Done);
  EXPECT_EQ(mine->look(b), Doorbell::Silent) << "b's record has not run";
  theirs->ring(b, Doorbell::Done);
  EXPECT_EQ(mine->look(b), Doorbell::Done);
  // a's bell was overwritten: its waiter is left to its notice message.
  EXPECT_EQ(mine->look(a), Doorbell::Silent);
}

// A waiter past its polling sleeps on the slot: a ring from the other process's
// mapping wakes it at once, not at the end of its nap; a ring for a tag sharing the
// slot wakes it too, but says nothing about its own.
TEST(NoticeBoard, ARingWakesAWaiterAsleepOnItsSlot) {
  using namespace std::chrono_literals;
  const uint64_t session = fresh_session();
  auto mine = NoticeBoard::create(session, 0);
  ASSERT_NE(mine, nullptr);
  auto theirs = NoticeBoard::open(session, 0);
  ASSERT_NE(theirs, nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(mine->wait_for(40, 20ms), Doorbell::Silent);  // nobody rings: the nap ends
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 15ms);

  auto ring_later = [&](int64_t tag, Doorbell what) {
    return std::thread([&theirs, tag, what] {
      std::this_thread::sleep_for(50ms);
      theirs->ring(tag, what);
    });
  };
  std::thread ringer = ring_later(41, Doorbell::Done);
  const auto t1 = std::chrono::steady_clock::now();
  NoticeBoard::Doorbell bell = Doorbell::Silent;
  while (bell == Doorbell::Silent) bell = mine->wait_for(41, 60s);
  // 60 s naps: only the ring can have ended the wait within the test's time.
  EXPECT_EQ(bell, Doorbell::Done);
  EXPECT_LT(std::chrono::steady_clock::now() - t1, 30s);
  ringer.join();

  const int64_t shares_slot = 42 + static_cast<int64_t>(NoticeBoard::kSlots);
  ringer = ring_later(shares_slot, Doorbell::Done);
  EXPECT_EQ(mine->wait_for(42, 60s), Doorbell::Silent);  // woken, but not for 42
  ringer.join();
  EXPECT_EQ(mine->look(shares_slot), Doorbell::Done);

  ringer = ring_later(43, Doorbell::ReadNotice);
  bell = Doorbell::Silent;
  while (bell == Doorbell::Silent) bell = mine->wait_for(43, 60s);
  EXPECT_EQ(bell, Doorbell::ReadNotice);
  ringer.join();
}

TEST(NoticeBoard, TagsItCannotEncodeNeverRing) {
  auto mine = NoticeBoard::create(fresh_session(), 0);
  ASSERT_NE(mine, nullptr);
  mine->ring(-1, Doorbell::Done);
  EXPECT_EQ(mine->look(-1), Doorbell::Silent);
  mine->ring(std::numeric_limits<int64_t>::max(), Doorbell::Done);
  EXPECT_EQ(mine->look(std::numeric_limits<int64_t>::max()), Doorbell::Silent);
}

TEST(NoticeBoard, ANodeOnAnotherHostHasNoBoardHere) {
  EXPECT_EQ(NoticeBoard::open(fresh_session(), 3), nullptr);
}

TEST(NoticeBoard, ItsOwnerRemovesItsFileAndNeverSharesOneAlreadyThere) {
  const uint64_t session = fresh_session();
  {
    auto mine = NoticeBoard::create(session, 2);
    ASSERT_NE(mine, nullptr);
    EXPECT_EQ(NoticeBoard::create(session, 2), nullptr) << "two owners of one board";
    auto theirs = NoticeBoard::open(session, 2);
    ASSERT_NE(theirs, nullptr);
    theirs.reset();  // a peer's mapping going does not remove the file
    EXPECT_NE(NoticeBoard::open(session, 2), nullptr);
  }
  EXPECT_EQ(NoticeBoard::open(session, 2), nullptr) << "the board outlived its owner";
  EXPECT_EQ(::shm_unlink(NoticeBoard::name_of(session, 2, ::getpid()).c_str()), -1);
}

// Files under the board's name that are not what a board of this user is: opened by
// nobody, so a waiter never trusts a bell anyone else could ring.
TEST(NoticeBoard, AFileOthersCanWriteOrOfAnotherSizeIsNotABoard) {
  const uint64_t session = fresh_session();
  const std::string name = NoticeBoard::name_of(session, 0, ::getpid());
  struct Case {
    const char* what;
    mode_t mode;
    off_t size;
  };
  for (const Case& c : {Case{"readable by others", 0644, static_cast<off_t>(NoticeBoard::kBytes)},
                        Case{"writable by its group", 0660, static_cast<off_t>(NoticeBoard::kBytes)},
                        Case{"too small", 0600, 64}}) {
    SCOPED_TRACE(c.what);
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fchmod(fd, c.mode), 0);
    ASSERT_EQ(::ftruncate(fd, c.size), 0);
    ::close(fd);
    EXPECT_EQ(NoticeBoard::open(session, 0), nullptr);
    EXPECT_EQ(NoticeBoard::create(session, 0), nullptr);  // and never taken over
    ASSERT_EQ(::shm_unlink(name.c_str()), 0);
  }
}

// A worker killed mid-session leaves its board's file behind; the next board made
// on the host removes it (and leaves a living process's alone).
TEST(NoticeBoard, BoardsOfProcessesThatAreGoneAreRemovedByTheNextOne) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // its pid now names nobody
  const uint64_t session = fresh_session();
  const std::string stale = NoticeBoard::name_of(session, 0, child);
  const std::string living = NoticeBoard::name_of(session, 1, ::getppid());
  for (const std::string& name : {stale, living}) {
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(NoticeBoard::kBytes)), 0);
    ::close(fd);
  }
  EXPECT_NE(NoticeBoard::open(session, 0), nullptr);
  auto mine = NoticeBoard::create(fresh_session(), 0);
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(NoticeBoard::open(session, 0), nullptr) << "the dead process's board is still there";
  EXPECT_NE(NoticeBoard::open(session, 1), nullptr) << "a living process's board was removed";
  EXPECT_EQ(::shm_unlink(living.c_str()), 0);
}

}  // namespace
}  // namespace thd::worker
