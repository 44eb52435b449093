// RequestState's finishing without a lock: one winner, fields published with the
// status, and blocked waiters (sleeping on shared stripes) always woken, whenever
// they arrive. And the
// per-thread recycling of the memory requests are made in.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <thd/error.h>

#include <thd/tensor.h>

#include "datachannel/channel_util.h"
#include "datachannel/group_state.h"
#include "datachannel/recycling_allocator.h"
#include "datachannel/request_state.h"

namespace thd::detail {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<RequestState> request() {
  return std::make_shared<RequestState>("test", net::Deadline::max(), nullptr, 0);
}

// Finished by its only waiter's own progress round (finished_by_its_waiter): the
// same outcome as any finish, the first finish still the only one, and the
// collective lane still told.
TEST(RequestState, ItsOwnWaitersRoundFinishesItOnceWithItsFields) {
  auto r = request();
  r->finished_by_its_waiter = true;
  EXPECT_TRUE(r->complete(3, 8));
  EXPECT_EQ(r->status(), RequestState::Done);
  EXPECT_EQ(r->source, 3);
  EXPECT_EQ(r->bytes, 8U);
  EXPECT_FALSE(r->complete(4, 16));
  EXPECT_EQ(r->source, 3);
  r->finished_by_its_waiter = false;
  EXPECT_FALSE(r->fail(std::make_exception_ptr(ValueError("late"))));
  EXPECT_EQ(r->status(), RequestState::Done);
  EXPECT_TRUE(r->block_until(net::Deadline::max()));

  auto failed = request();
  ASSERT_TRUE(failed->fail(std::make_exception_ptr(ValueError("first"))));
  failed->finished_by_its_waiter = true;
  EXPECT_FALSE(failed->complete(1, 8)) << "a failed request was completed after all";
  EXPECT_EQ(failed->status(), RequestState::Failed);
}

TEST(RequestState, TheFirstOfCompleteAndFailWinsAndItsFieldsAreSeen) {
  for (int round = 0; round < 200; ++round) {
    auto r = request();
    std::atomic<int> winners{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> racers;
    for (int i = 0; i < 4; ++i) {
      racers.emplace_back([&, i] {
        while (!go.load()) {
        }
        const bool won = i % 2 == 0 ? r->complete(i, 100 + static_cast<size_t>(i))
                                    : r->fail(std::make_exception_ptr(ValueError("racer " + std::to_string(i))));
        if (won) winners.fetch_add(1);
      });
    }
    go.store(true);
    for (auto& t : racers) t.join();
    EXPECT_EQ(winners.load(), 1);
    ASSERT_TRUE(r->finished());
    if (r->status() == RequestState::Done) {
      EXPECT_EQ(r->bytes, 100 + static_cast<size_t>(r->source));
      EXPECT_EQ(r->error, nullptr);
    } else {
      EXPECT_NE(r->error, nullptr);
      EXPECT_EQ(r->source, -1);
    }
  }
}

TEST(RequestState, ABlockedWaiterWakesWhenAnotherThreadFinishesIt) {
  for (int round = 0; round < 50; ++round) {
    auto r = request();
    std::atomic<bool> woke{false};
    const auto start = std::chrono::steady_clock::now();
    std::thread waiter([&] { woke.store(r->block_until(net::Clock::now() + 30s)); });
    if (round % 2 == 0) std::this_thread::sleep_for(1ms);  // the waiter asleep, or just arriving
    r->complete(3, 8);
    waiter.join();
    EXPECT_TRUE(woke.load());
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  }
}

// Waiters arriving while the request is being finished: before the finisher's
// claim (it must see them and wake them), between its claim and its publish (they
// wait for the publish), or after. None may sleep until its deadline.
TEST(RequestState, WaitersRacingTheFinisherAreNeverLeftAsleep) {
  for (int round = 0; round < 400; ++round) {
    auto r = request();
    std::atomic<int> ready{0};
    std::atomic<int> woke{0};
    std::vector<std::thread> waiters;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 2; ++i) {
      waiters.emplace_back([&] {
        ready.fetch_add(1);
        while (ready.load() < 3) std::this_thread::yield();
        if (r->block_until(net::Clock::now() + 30s)) woke.fetch_add(1);
      });
    }
    ready.fetch_add(1);
    while (ready.load() < 3) std::this_thread::yield();
    if (round % 2 == 0) {
      r->complete(1, 8);
    } else {
      r->fail(std::make_exception_ptr(Error("x")));
    }
    for (auto& t : waiters) t.join();
    ASSERT_EQ(woke.load(), 2) << "round " << round;
    ASSERT_LT(std::chrono::steady_clock::now() - start, 10s) << "round " << round;
    if (round % 2 == 0) {
      EXPECT_EQ(r->bytes, 8U);
    }
  }
}

// Requests share the stripes their waiters sleep on: finishing one must not lose
// the wake-up of another, and a waiter woken for a neighbour sleeps on.
TEST(RequestState, WaitersOfManyRequestsAreEachWokenByTheirOwn) {
  constexpr int kRequests = 200;
  std::vector<std::shared_ptr<RequestState>> requests;
  for (int i = 0; i < kRequests; ++i) requests.push_back(request());
  std::atomic<int> woken{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < kRequests; ++i) {
    waiters.emplace_back([&, i] {
      if (requests[static_cast<size_t>(i)]->block_until(net::Clock::now() + 30s)) woken.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(20ms);
  // Every other one first: their neighbours' waiters are woken and must sleep again.
  for (int i = 0; i < kRequests; i += 2) requests[static_cast<size_t>(i)]->complete(i, 0);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(woken.load(), kRequests / 2);
  for (int i = 1; i < kRequests; i += 2) requests[static_cast<size_t>(i)]->fail(std::make_exception_ptr(Error("x")));
  for (auto& t : waiters) t.join();
  EXPECT_EQ(woken.load(), kRequests);
}

TEST(RequestState, BlockingOnAnUnfinishedRequestEndsAtTheDeadline) {
  auto r = request();
  const auto start = net::Clock::now();
  EXPECT_FALSE(r->block_until(start + 30ms));
  EXPECT_GE(net::Clock::now() - start, 30ms);
  EXPECT_FALSE(r->finished());
}

RequestSpec counted_from_wait(std::chrono::milliseconds timeout) {
  return RequestSpec{"recv from rank 1", {}, 0, false, {}, nullptr, timeout};
}

// A blocking call's deadline is counted from its wait's first clock read: a wait
// that finds the request finished reads no clock and leaves the deadline open.
TEST(RequestState, AWaitThatFindsTheRequestFinishedNeverFixesItsDeadline) {
  RequestState s(counted_from_wait(1h), nullptr);
  EXPECT_FALSE(s.deadline_fixed());
  EXPECT_TRUE(s.complete(1, 8));
  EXPECT_TRUE(wait_own_interruptibly(s));
  EXPECT_FALSE(s.deadline_fixed());
}

TEST(RequestState, ADeadlineCountedFromTheWaitEndsTheWaitOnTime) {
  RequestState s(counted_from_wait(100ms), nullptr);
  const auto start = net::Clock::now();
  EXPECT_FALSE(wait_own_interruptibly(s));
  const auto waited = net::Clock::now() - start;
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 2s);
  ASSERT_TRUE(s.deadline_fixed());
  // Fixed once: every later look (another waiter's, the expiry's) sees the same.
  const net::Deadline fixed = s.deadline();
  EXPECT_GE(fixed, start + 100ms);
  EXPECT_LE(fixed, net::Clock::now());
  EXPECT_EQ(s.deadline(net::Clock::now() + 1h), fixed);
}

TEST(RequestState, ADeadlineCountedFromTheWaitIsFixedFromTheFirstClockReadAndSaturates) {
  const net::Deadline now = net::Clock::now();
  RequestState s(counted_from_wait(250ms), nullptr);
  EXPECT_EQ(s.deadline(now), now + 250ms);
  EXPECT_EQ(s.deadline(now + 1s), now + 250ms);
  RequestState never(counted_from_wait(std::chrono::milliseconds::max()), nullptr);
  EXPECT_EQ(never.deadline(now), net::Deadline::max());
  // A deadline given when the request is made is never moved.
  RequestState fixed(RequestSpec{"recv from rank 1", now + 5ms, 0, false, {}, nullptr, std::nullopt}, nullptr);
  EXPECT_TRUE(fixed.deadline_fixed());
  EXPECT_EQ(fixed.deadline(now + 1h), now + 5ms);
}

struct Block {
  alignas(16) char bytes[200];
};

// A point-to-point request keeps its tensor's memory by the storage alone: a copy
// of the tensor's handle (shape and strides) cost allocations on every message.
TEST(RequestState, APointToPointRequestKeepsItsTensorsStorageNotAHandle) {
  GroupState world;
  Tensor t = Tensor::zeros({4});
  const std::weak_ptr<StorageImpl> storage = t.storage();
  auto kept = make_request(world, RequestSpec{"send to rank 1", net::Deadline::max(), 0, false, {}, &t}, nullptr);
  EXPECT_TRUE(kept->keeps_memory());
  EXPECT_TRUE(kept->keepalive.empty());
  t = Tensor();
  EXPECT_FALSE(storage.expired());  // the request alone holds the memory now
  kept.reset();
  EXPECT_TRUE(storage.expired());

  // Bytes of the caller's own: borrowed until the request finishes.
  auto borrowed = make_request(world, RequestSpec{"send to rank 1", net::Deadline::max(), 0}, nullptr);
  EXPECT_FALSE(borrowed->keeps_memory());
  // A collective's tensors count too.
  borrowed->keepalive.push_back(Tensor::zeros({1}));
  EXPECT_TRUE(borrowed->keeps_memory());
}

TEST(RecyclingAllocator, AFreedBlockServesTheNextAllocationOnItsThread) {
  RecyclingAllocator<Block> alloc;
  Block* a = alloc.allocate(1);
  alloc.deallocate(a, 1);
  Block* b = alloc.allocate(1);
  EXPECT_EQ(a, b);
  alloc.deallocate(b, 1);
  // Arrays go to the heap both ways.
  Block* many = alloc.allocate(3);
  alloc.deallocate(many, 3);
}

TEST(RecyclingAllocator, AThreadKeepsAFewSparesAndReturnsTheRest) {
  RecyclingAllocator<Block> alloc;
  std::vector<Block*> blocks;
  for (int i = 0; i < 500; ++i) blocks.push_back(alloc.allocate(1));
  // Freed on another thread: that thread keeps some and hands the rest back.
  std::thread freer([&] {
    for (Block* b : blocks) alloc.deallocate(b, 1);
  });
  freer.join();
  // This thread's own spares are untouched by it: allocations are distinct.
  std::set<Block*> fresh;
  for (int i = 0; i < 100; ++i) fresh.insert(alloc.allocate(1));
  EXPECT_EQ(fresh.size(), 100u);
  for (Block* b : fresh) alloc.deallocate(b, 1);
}

TEST(RecyclingAllocator, RequestsMadeWithItAreSharedAsUsual) {
  auto r = std::allocate_shared<RequestState>(RecyclingAllocator<RequestState>(), "recycled", net::Deadline::max(),
                                              nullptr, 0);
  std::weak_ptr<RequestState> weak = r;
  auto copy = r;
  r.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_TRUE(copy->complete(1, 2));
  copy.reset();
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace thd::detail
