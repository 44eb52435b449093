// The Store contract, written once and run on every Store implementation.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include <thd/store.h>

#include "datachannel/test_util.h"

namespace thd {
namespace {

using namespace std::chrono_literals;
using Bytes = std::vector<uint8_t>;

// Each fixture gives a store under test (main) and more handles on the same data
// (peer): another object, and for FileStore and TCPStore another connection, as
// a second process would have.
struct HashStoreSetup {
  std::shared_ptr<HashStore> store = std::make_shared<HashStore>(test::kLong);
  std::shared_ptr<Store> main() { return store; }
  std::shared_ptr<Store> peer() { return store; }
};

struct FileStoreSetup {
  test::TempDir dir;
  std::shared_ptr<Store> first = std::make_shared<FileStore>(dir.file("store"), -1, test::kLong);
  std::shared_ptr<Store> main() { return first; }
  std::shared_ptr<Store> peer() { return std::make_shared<FileStore>(dir.file("store"), -1, test::kLong); }
};

struct TCPStoreSetup {
  std::shared_ptr<TCPStore> server = std::make_shared<TCPStore>(TCPStoreOptions{
      .port = 0, .is_server = true, .timeout = test::kLong, .token = test::kToken});
  std::shared_ptr<Store> main() { return server; }
  std::shared_ptr<Store> peer() {
    return std::make_shared<TCPStore>(
        TCPStoreOptions{.port = server->port(), .timeout = test::kLong, .token = test::kToken});
  }
};

struct PrefixStoreSetup {
  std::shared_ptr<HashStore> base = std::make_shared<HashStore>(test::kLong);
  std::shared_ptr<Store> main() { return std::make_shared<PrefixStore>("group7", base); }
  std::shared_ptr<Store> peer() { return std::make_shared<PrefixStore>("group7", base); }
};

template <typename Fixture>
class StoreTest : public ::testing::Test {
 protected:
  Fixture setup;
  std::shared_ptr<Store> store = setup.main();
};

using StoreTypes = ::testing::Types<HashStoreSetup, FileStoreSetup, TCPStoreSetup, PrefixStoreSetup>;
class StoreNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, HashStoreSetup>) return "HashStore";
    if (std::is_same_v<T, FileStoreSetup>) return "FileStore";
    if (std::is_same_v<T, TCPStoreSetup>) return "TCPStore";
    return "PrefixStore";
  }
};
TYPED_TEST_SUITE(StoreTest, StoreTypes, StoreNames);

TYPED_TEST(StoreTest, SetThenGetReturnsTheBytes) {
  Store& s = *this->store;
  const Bytes binary = {0, 1, 0xff, 0, 42};
  s.set("k", binary);
  EXPECT_EQ(s.get("k"), binary);
  s.set("empty", Bytes{});
  EXPECT_EQ(s.get("empty"), Bytes{});
  s.set("k", "replaced");
  EXPECT_EQ(s.get_string("k"), "replaced");
  // Keys are bytes too.
  s.set(std::string("a\0b", 3), "nul");
  EXPECT_EQ(s.get_string(std::string("a\0b", 3)), "nul");
  EXPECT_FALSE(s.check({"a"}));
}

TYPED_TEST(StoreTest, PeersSeeEachOthersWrites) {
  auto other = this->setup.peer();
  this->store->set("from-main", "1");
  EXPECT_EQ(other->get_string("from-main"), "1");
  other->set("from-peer", "2");
  EXPECT_EQ(this->store->get_string("from-peer"), "2");
}

TYPED_TEST(StoreTest, LargeValuesRoundTrip) {
  Bytes big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 131 + 7);
  this->store->set("big", big);
  EXPECT_EQ(this->setup.peer()->get("big"), big);
}

TYPED_TEST(StoreTest, GetBlocksUntilAnotherClientSets) {
  auto other = this->setup.peer();
  const auto start = std::chrono::steady_clock::now();
  std::thread setter([&] {
    std::this_thread::sleep_for(100ms);
    other->set("late", "here");
  });
  EXPECT_EQ(this->store->get_string("late"), "here");
  setter.join();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 90ms);
}

TYPED_TEST(StoreTest, GetTimesOutNamingTheKey) {
  const auto start = std::chrono::steady_clock::now();
  THD_EXPECT_THROW_MSG(this->store->get("never", 100ms), TimeoutError, "never' was not set");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 95ms);
  EXPECT_LT(took, 2s);
  this->store->set_timeout(50ms);
  EXPECT_EQ(this->store->timeout(), 50ms);
  THD_EXPECT_THROW_MSG(this->store->get("never"), TimeoutError, "within 50 ms");
  THD_EXPECT_THROW_MSG(this->store->get("never", -1ms), ValueError, "timeout must be >= 0");
}

TYPED_TEST(StoreTest, AddKeepsADecimalCounter) {
  Store& s = *this->store;
  EXPECT_EQ(s.add("n", 5), 5);  // missing counts as 0
  EXPECT_EQ(s.add("n", -7), -2);
  EXPECT_EQ(s.add("n", 0), -2);
  EXPECT_EQ(s.get_string("n"), "-2");
  s.set("m", "40");
  EXPECT_EQ(s.add("m", 2), 42);
  s.set("text", "forty");
  THD_EXPECT_THROW_MSG(s.add("text", 1), ValueError, "not a decimal integer");
  EXPECT_EQ(s.get_string("text"), "forty");  // unchanged
  s.set("big", std::to_string(INT64_MAX));
  THD_EXPECT_THROW_MSG(s.add("big", 1), ValueError, "overflows int64");
  s.set("spaced", " 1");
  EXPECT_THROW(s.add("spaced", 1), ValueError);
}

TYPED_TEST(StoreTest, CompareSetFollowsTorch) {
  Store& s = *this->store;
  // Missing key, empty expected: set.
  EXPECT_EQ(s.compare_set("k", "", "first"), "first");
  EXPECT_EQ(s.get_string("k"), "first");
  // Current value matches: swapped.
  EXPECT_EQ(s.compare_set("k", "first", "second"), "second");
  // Mismatch: unchanged, the current value returned.
  EXPECT_EQ(s.compare_set("k", "first", "third"), "second");
  EXPECT_EQ(s.get_string("k"), "second");
  // Missing key, nonempty expected: nothing stored, `expected` returned (torch).
  EXPECT_EQ(s.compare_set("absent", "x", "y"), "x");
  EXPECT_FALSE(s.check({"absent"}));
  // Binary values through the byte overload.
  EXPECT_EQ(s.compare_set("b", Bytes{}, Bytes{0, 1}), (Bytes{0, 1}));
}

TYPED_TEST(StoreTest, CompareSetWakesWaiters) {
  auto other = this->setup.peer();
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    other->compare_set("cs", "", "v");
  });
  EXPECT_EQ(this->store->get_string("cs"), "v");
  setter.join();
}

TYPED_TEST(StoreTest, WaitReturnsOnceAllKeysAreSet) {
  auto other = this->setup.peer();
  this->store->set("a", "1");
  this->store->wait({"a"});
  this->store->wait({});
  const auto start = std::chrono::steady_clock::now();
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    other->set("b", "2");
    std::this_thread::sleep_for(50ms);
    other->set("c", "3");
  });
  this->store->wait({"a", "b", "c"}, test::kLong);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 90ms);
  setter.join();
}

TYPED_TEST(StoreTest, WaitTimeoutNamesOnlyTheMissingKeys) {
  this->store->set("present", "1");
  try {
    this->store->wait({"present", "gone1", "gone2"}, 100ms);
    ADD_FAILURE() << "wait did not time out";
  } catch (const TimeoutError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("2 of 3 keys"), std::string::npos) << msg;
    EXPECT_NE(msg.find("gone1'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("gone2'"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("present"), std::string::npos) << msg;
    EXPECT_EQ(e.context().op, "store.wait");
  }
}

TYPED_TEST(StoreTest, WaitSeesAKeyDeletedAndSetAgain) {
  // A waiter woken by one key must keep watching the others, including a key that
  // was set, then deleted before the last one arrived.
  auto other = this->setup.peer();
  std::thread writer([&] {
    std::this_thread::sleep_for(30ms);
    other->set("x", "1");
    other->delete_key("x");
    other->set("y", "1");
    std::this_thread::sleep_for(50ms);
    other->set("x", "again");
  });
  this->store->wait({"x", "y"}, test::kLong);
  writer.join();
  EXPECT_EQ(this->store->get_string("x"), "again");
}

TYPED_TEST(StoreTest, CheckDeleteAndNumKeys) {
  Store& s = *this->store;
  const int64_t before = s.num_keys();
  EXPECT_TRUE(s.check({}));
  EXPECT_FALSE(s.check({"p"}));
  s.set("p", "1");
  s.set("q", "2");
  EXPECT_TRUE(s.check({"p", "q"}));
  EXPECT_FALSE(s.check({"p", "r"}));
  EXPECT_EQ(s.num_keys(), before + 2);
  EXPECT_TRUE(s.delete_key("p"));
  EXPECT_FALSE(s.delete_key("p"));
  EXPECT_FALSE(s.check({"p"}));
  EXPECT_EQ(s.num_keys(), before + 1);
  EXPECT_THROW(s.get("p", 10ms), TimeoutError);
}

TYPED_TEST(StoreTest, ConcurrentAddsFromThreadsAreExact) {
  constexpr int kThreads = 4;
  constexpr int kAdds = 100;
  std::vector<std::shared_ptr<Store>> handles;
  for (int t = 0; t < kThreads; ++t) {
    // Half the threads share the main handle, half have their own.
    handles.push_back(t % 2 == 0 ? this->store : this->setup.peer());
  }
  std::vector<std::thread> threads;
  std::atomic<int64_t> max_seen{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAdds; ++i) {
        int64_t v = handles[t]->add("counter", 1);
        int64_t m = max_seen.load();
        while (v > m && !max_seen.compare_exchange_weak(m, v)) {
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(this->store->add("counter", 0), kThreads * kAdds);
  EXPECT_EQ(max_seen.load(), kThreads * kAdds);  // every add returned its own result
}

}  // namespace
}  // namespace thd
