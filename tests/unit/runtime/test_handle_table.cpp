// The worker's handle table: ids indexed without hashing, pages reused once empty,
// ids too far apart for the window kept in its map, and the command loop's and the
// streams' threads defining, finding and taking entries at once.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "worker/handle_table.h"

namespace thd::worker {
namespace {

Tensor value(float v) { return Tensor::full({4}, v); }

float first(const Entry* e) { return e->tensor.to_vector<float>()[0]; }

TEST(HandleTable, DefinesFindsAndTakes) {
  HandleTable t;
  EXPECT_EQ(t.find(1), nullptr);
  t.define(1, value(1));
  t.define(300, value(300));  // another page
  ASSERT_NE(t.find(1), nullptr);
  EXPECT_EQ(first(t.find(1)), 1.0f);
  EXPECT_EQ(first(t.find(300)), 300.0f);
  EXPECT_EQ(t.find(2), nullptr);
  EXPECT_EQ(t.find(0), nullptr);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_THROW(t.define(1, value(2)), ValueError);
  EXPECT_THROW(t.define(0, value(2)), ValueError);
  EXPECT_EQ(first(t.find(1)), 1.0f);  // the refused define changed nothing

  const uint64_t erasures = t.erasures();
  Tensor out;
  EXPECT_TRUE(t.take(1, out));
  EXPECT_EQ(out.to_vector<float>()[0], 1.0f);
  EXPECT_EQ(t.erasures(), erasures + 1);
  EXPECT_FALSE(t.take(1, out));
  EXPECT_EQ(t.find(1), nullptr);
  EXPECT_EQ(t.size(), 1u);
}

TEST(HandleTable, PoisonsAndAssigns) {
  HandleTable t;
  auto p = std::make_shared<const Poison>(Poison{7, "add", "boom", 0});
  t.poison(5, p);  // not live: made live, poisoned
  ASSERT_NE(t.find(5), nullptr);
  EXPECT_EQ(t.find(5)->poison, p);
  EXPECT_FALSE(t.find(5)->tensor.defined());
  EXPECT_THROW(t.define(5, value(1)), ValueError);
  const Entry* kept = t.find(5);
  t.assign(5, value(3));  // over the poison, in the same place
  EXPECT_EQ(t.find(5), kept);
  EXPECT_EQ(kept->poison, nullptr);
  EXPECT_EQ(first(kept), 3.0f);
  t.assign(6, value(4));  // not live: defined
  EXPECT_EQ(first(t.find(6)), 4.0f);
  t.poison(6, p);
  EXPECT_EQ(t.find(6)->poison, p);
  EXPECT_EQ(t.size(), 2u);
  t.poison(0, p);  // "no tensor": nothing
  EXPECT_EQ(t.size(), 2u);
  Tensor out;
  EXPECT_TRUE(t.take(6, out));  // a poison is taken as an undefined tensor
  EXPECT_FALSE(out.defined());
}

TEST(HandleTable, EntriesKeepTheirAddressUntilAnErasure) {
  HandleTable t;
  t.define(10, value(10));
  const Entry* e = t.find(10);
  const uint64_t erasures = t.erasures();
  for (uint64_t id = 11; id < 11 + 5 * HandleTable::kPageSlots; ++id) t.define(id, value(0));
  EXPECT_EQ(t.erasures(), erasures);
  EXPECT_EQ(t.find(10), e);
  EXPECT_EQ(first(e), 10.0f);
}

TEST(HandleTable, ReusesEmptiedPages) {
  HandleTable t;
  t.define(1, value(1));  // keeps the first page
  // The loop of a program: each new result frees the previous one.
  const uint64_t n = 50 * HandleTable::kPageSlots;
  for (uint64_t id = 2; id < n; ++id) {
    t.define(id, value(static_cast<float>(id)));
    if (id > 2) {
      Tensor out;
      ASSERT_TRUE(t.take(id - 1, out));
    }
    ASSERT_EQ(first(t.find(id)), static_cast<float>(id));
  }
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(first(t.find(1)), 1.0f);
  EXPECT_EQ(t.find(n / 2), nullptr);
  // An id below the pages already unlinked comes back (ops of streams define out of order).
  t.define(HandleTable::kPageSlots * 3 + 7, value(9));
  EXPECT_EQ(first(t.find(HandleTable::kPageSlots * 3 + 7)), 9.0f);
}

TEST(HandleTable, KeepsIdsFarApartOutsideTheWindow) {
  HandleTable t;
  const uint64_t far = 5 + HandleTable::kWindowSpan;  // the same window slot as 5
  t.define(5, value(5));
  t.define(far, value(6));
  EXPECT_EQ(t.outside_window(), 1u);
  EXPECT_EQ(first(t.find(5)), 5.0f);
  EXPECT_EQ(first(t.find(far)), 6.0f);
  EXPECT_THROW(t.define(far, value(7)), ValueError);
  t.assign(far, value(8));
  EXPECT_EQ(first(t.find(far)), 8.0f);
  t.define(~uint64_t{0}, value(9));  // the largest id
  EXPECT_EQ(first(t.find(~uint64_t{0})), 9.0f);
  EXPECT_EQ(t.size(), 3u);
  Tensor out;
  EXPECT_TRUE(t.take(5, out));
  EXPECT_TRUE(t.take(far, out));
  EXPECT_EQ(out.to_vector<float>()[0], 8.0f);
  EXPECT_TRUE(t.take(~uint64_t{0}, out));
  EXPECT_FALSE(t.take(far, out));
  EXPECT_EQ(t.outside_window(), 0u);
  EXPECT_EQ(t.size(), 0u);
  // With 5 gone its page is unlinked once a newer page is made (the newest page
  // stays while empty), and its block with it: `far` has the window slot to itself.
  const uint64_t next_block = HandleTable::kPageSlots * HandleTable::kBlockPages;
  t.define(next_block, value(11));
  t.define(far, value(10));
  EXPECT_EQ(t.outside_window(), 0u);
  EXPECT_EQ(first(t.find(far)), 10.0f);
  EXPECT_EQ(first(t.find(next_block)), 11.0f);
}

// Streams' threads define and free their own ids, interleaved so that they share
// pages (made and unlinked again and again), while each also reads a tensor every
// thread can see: every lookup finds what was defined, none finds a freed id.
TEST(HandleTable, ThreadsDefineFindAndTakeAtOnce) {
  HandleTable t;
  t.define(1, value(42));
  constexpr uint64_t kThreads = 4;
  constexpr uint64_t kRounds = 20000;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (uint64_t k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      const Tensor mine = value(static_cast<float>(k));
      uint64_t previous = 0;
      for (uint64_t r = 0; r < kRounds; ++r) {
        const uint64_t id = 2 + r * kThreads + k;
        t.define(id, mine);
        const Entry* e = t.find(id);
        if (e == nullptr || e->tensor.storage() != mine.storage()) ++failures;
        if (const Entry* shared = t.find(1); shared == nullptr || !shared->tensor.defined()) ++failures;
        if (previous != 0) {
          Tensor out;
          if (!t.take(previous, out) || out.storage() != mine.storage()) ++failures;
          if (t.find(previous) != nullptr) ++failures;
        }
        previous = id;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(t.size(), 1 + kThreads);
  EXPECT_EQ(first(t.find(1)), 42.0f);
}

// Two threads define the same id at once (a master that sent it twice): exactly
// one succeeds, the other is told it is in use.
TEST(HandleTable, OneOfTwoDefinitionsOfAnIdWins) {
  for (int round = 0; round < 200; ++round) {
    HandleTable t;
    const uint64_t id = 1000 + static_cast<uint64_t>(round);
    std::atomic<int> refused{0};
    auto define = [&] {
      try {
        t.define(id, value(1));
      } catch (const ValueError&) {
        ++refused;
      }
    };
    std::thread a(define), b(define);
    a.join();
    b.join();
    ASSERT_EQ(refused.load(), 1);
    ASSERT_EQ(t.size(), 1u);
  }
}

}  // namespace
}  // namespace thd::worker
