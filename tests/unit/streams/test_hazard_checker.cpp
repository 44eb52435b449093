#include "streams/hazard_checker.h"

#include <gtest/gtest.h>

#include <thd/error.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace thd::streams {
namespace {

constexpr StreamKey kDefault{0, 0};
constexpr StreamKey kS1{0, 1};
constexpr StreamKey kS2{0, 2};
constexpr StreamKey kS3{0, 3};

Access write_of(uint64_t tensor, int64_t begin = 0, int64_t end = 64, uint64_t storage = 100) {
  return Access{.storage = storage, .begin = begin, .end = end, .write = true, .tensor_id = tensor};
}

Access read_of(uint64_t tensor, int64_t begin = 0, int64_t end = 64, uint64_t storage = 100) {
  return Access{.storage = storage, .begin = begin, .end = end, .write = false, .tensor_id = tensor};
}

// One op with one access.
std::vector<Hazard> op(HazardChecker& c, StreamKey s, uint64_t id, const char* name, Access a) {
  return c.on_op(s, id, name, std::span<const Access>(&a, 1));
}

// `waiter` waits on an event recorded on `recorded_on` now.
void sync(HazardChecker& c, StreamKey recorded_on, StreamKey waiter) {
  c.on_wait(waiter, c.on_record(recorded_on));
}

// --- StreamKey and VectorClock -------------------------------------------------------

TEST(StreamKey, DescribesNodeAndStream) {
  EXPECT_EQ(describe(StreamKey{1, 3}), "node 1 stream 3");
  EXPECT_EQ(describe(StreamKey{1, 0}), "node 1 default stream");
  EXPECT_LT((StreamKey{0, 7}), (StreamKey{1, 0}));
  EXPECT_NE(StreamKeyHash{}(StreamKey{0, 1}), StreamKeyHash{}(StreamKey{1, 0}));
}

TEST(VectorClock, TickGetMergeAndOrder) {
  VectorClock a;
  EXPECT_EQ(a.get(kS1), 0u);
  EXPECT_EQ(a.tick(kS1), 1u);
  EXPECT_EQ(a.tick(kS1), 2u);
  VectorClock b;
  b.tick(kS2);
  EXPECT_FALSE(a.happens_before(b));
  EXPECT_FALSE(b.happens_before(a));
  b.merge(a);
  EXPECT_EQ(b.get(kS1), 2u);
  EXPECT_EQ(b.get(kS2), 1u);
  EXPECT_TRUE(a.happens_before(b));
  EXPECT_FALSE(b.happens_before(a));
  EXPECT_TRUE(b.covers(kS1, 2));
  EXPECT_FALSE(b.covers(kS1, 3));
  EXPECT_TRUE(VectorClock().happens_before(a));

  // Merge keeps the maximum per stream whichever side has it, and entries sorted.
  VectorClock c;
  c.raise(kS3, 9);
  c.raise(kS1, 1);
  c.merge(b);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c.entries()[0].stream, kS1);
  EXPECT_EQ(c.entries()[0].count, 2u);
  EXPECT_EQ(c.entries()[2].stream, kS3);
  EXPECT_EQ(c.get(kS3), 9u);
  c.erase(kS3);
  EXPECT_EQ(c.get(kS3), 0u);
  EXPECT_EQ(c, b);

  // Same streams on both sides (merged in place): still the maximum of each.
  VectorClock d;
  d.raise(kS1, 5);
  d.raise(kS2, 1);
  VectorClock e;
  e.raise(kS1, 2);
  e.raise(kS2, 3);
  d.merge(e);
  EXPECT_EQ(d.get(kS1), 5u);
  EXPECT_EQ(d.get(kS2), 3u);
}

TEST(VectorClock, SerializeRoundTrips) {
  VectorClock c;
  c.raise(StreamKey{0, 0}, 5);
  c.raise(StreamKey{3, 7}, uint64_t{1} << 40);
  c.raise(StreamKey{-2, 0xffffffffu}, 1);
  const std::vector<uint8_t> bytes = c.serialize();
  EXPECT_EQ(bytes.size(), VectorClock::kHeaderBytes + 3 * VectorClock::kEntryBytes);
  EXPECT_EQ(VectorClock::deserialize(bytes), c);
  EXPECT_EQ(VectorClock::deserialize(VectorClock().serialize()), VectorClock());
}

void expect_rejected(std::span<const uint8_t> bytes, const char* why) {
  try {
    (void)VectorClock::deserialize(bytes);
    ADD_FAILURE() << "accepted bytes that are " << why;
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(VectorClock, DeserializeRejectsTruncatedGarbageAndHugeCounts) {
  VectorClock c;
  c.raise(kS1, 3);
  c.raise(kS2, 4);
  const std::vector<uint8_t> good = c.serialize();
  for (size_t n = 0; n < good.size(); ++n) {
    expect_rejected(std::span(good.data(), n), "truncated");
  }
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  expect_rejected(longer, "trailing bytes");

  std::vector<uint8_t> version = good;
  version[0] = 0x7f;
  expect_rejected(version, "version");

  // A count that would make a naive reader allocate gigabytes.
  std::vector<uint8_t> huge = good;
  std::memset(huge.data() + 4, 0xff, 4);
  expect_rejected(huge, "more than the limit");

  // Entries must come in increasing order, once each, with non-zero counts.
  std::vector<uint8_t> swapped = good;
  std::memcpy(swapped.data() + 8, good.data() + 24, 16);
  std::memcpy(swapped.data() + 24, good.data() + 8, 16);
  expect_rejected(swapped, "out of order or repeated");
  std::vector<uint8_t> repeated = good;
  std::memcpy(repeated.data() + 24, good.data() + 8, 16);
  expect_rejected(repeated, "out of order or repeated");
  std::vector<uint8_t> zero = good;
  std::memset(zero.data() + 16, 0, 8);
  expect_rejected(zero, "zero count");

  // Random garbage never crashes; whatever it is, it is either a valid clock or a
  // ValueError.
  uint64_t x = 88172645463325252ULL;
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> junk(static_cast<size_t>(round % 60));
    for (auto& b : junk) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      b = static_cast<uint8_t>(x);
    }
    if (round % 3 == 0 && junk.size() >= 8) {  // a valid header over random entries
      std::memset(junk.data(), 0, 4);
      junk[0] = 1;
    }
    try {
      (void)VectorClock::deserialize(junk);
    } catch (const ValueError&) {
    }
  }
}

// --- HazardChecker ----------------------------------------------------------------

TEST(HazardChecker, PlantedRaceIsReportedNamingBothOpsAndStreams) {
  HazardChecker c;
  EXPECT_TRUE(op(c, kS1, 41, "mul_", write_of(12)).empty());
  const auto hazards = op(c, kS2, 57, "add", read_of(12));
  ASSERT_EQ(hazards.size(), 1u);
  const Hazard& h = hazards[0];
  EXPECT_EQ(h.storage, 100u);
  EXPECT_EQ(h.current.stream, kS2);
  EXPECT_EQ(h.current.op_id, 57u);
  EXPECT_EQ(h.current.op_name, "add");
  EXPECT_FALSE(h.current.write);
  EXPECT_EQ(h.earlier.stream, kS1);
  EXPECT_EQ(h.earlier.op_id, 41u);
  EXPECT_EQ(h.earlier.op_name, "mul_");
  EXPECT_TRUE(h.earlier.write);
  EXPECT_EQ(h.message(),
            "stream hazard on tensor 12 (node 0): op 57 'add' on node 0 stream 2 reads it while op 41 "
            "'mul_' on node 0 stream 1 wrote it with no event wait in between (record an event on "
            "stream 1 after 'mul_' and make stream 2 wait on it)");
}

TEST(HazardChecker, RecordAndWaitInBetweenIsSilent) {
  HazardChecker c;
  EXPECT_TRUE(op(c, kS1, 1, "mul_", write_of(12)).empty());
  sync(c, kS1, kS2);
  EXPECT_TRUE(op(c, kS2, 2, "add", read_of(12)).empty());
  // The wait orders what came before the record only: a later write on stream 1
  // races with the read on stream 2.
  const auto hazards = op(c, kS1, 3, "zero_", write_of(12));
  ASSERT_EQ(hazards.size(), 1u);
  EXPECT_EQ(hazards[0].earlier.op_id, 2u);
  EXPECT_FALSE(hazards[0].earlier.write);
}

TEST(HazardChecker, OrderingIsTransitive) {
  HazardChecker c;
  EXPECT_TRUE(op(c, kS1, 1, "fill_", write_of(5)).empty());
  const VectorClock e1 = c.on_record(kS1);
  c.on_wait(kS2, e1);
  EXPECT_TRUE(op(c, kS2, 2, "relu", read_of(6, 0, 64, 200)).empty());
  const VectorClock e2 = c.on_record(kS2);
  c.on_wait(kS3, e2);
  EXPECT_TRUE(op(c, kS3, 3, "sum", read_of(5)).empty());
  EXPECT_TRUE(c.clock(kS3).covers(kS1, 1));
}

TEST(HazardChecker, WaitOnAnEventRecordedBeforeTheWriteDoesNotOrderIt) {
  HazardChecker c;
  EXPECT_TRUE(op(c, kS1, 1, "fill_", write_of(7, 0, 64, 300)).empty());
  const VectorClock early = c.on_record(kS1);
  EXPECT_TRUE(op(c, kS1, 2, "mul_", write_of(12)).empty());
  c.on_wait(kS2, early);
  EXPECT_TRUE(op(c, kS2, 3, "add", read_of(7, 0, 64, 300)).empty());  // ordered
  const auto hazards = op(c, kS2, 4, "add", read_of(12));
  ASSERT_EQ(hazards.size(), 1u);
  EXPECT_EQ(hazards[0].earlier.op_id, 2u);
}

TEST(HazardChecker, ReadAfterReadIsSilent) {
  HazardChecker c;
  EXPECT_TRUE(op(c, kS1, 1, "sum", read_of(12)).empty());
  EXPECT_TRUE(op(c, kS2, 2, "mean", read_of(12)).empty());
  EXPECT_TRUE(op(c, kS3, 3, "max", read_of(12)).empty());
}

TEST(HazardChecker, WriteAfterReadIsReported) {
  HazardChecker c;
  EXPECT_TRUE(op(c, kS1, 1, "sum", read_of(12)).empty());
  const auto hazards = op(c, kS2, 2, "zero_", write_of(12));
  ASSERT_EQ(hazards.size(), 1u);
  EXPECT_TRUE(hazards[0].current.write);
  EXPECT_FALSE(hazards[0].earlier.write);
  EXPECT_NE(hazards[0].message().find("op 2 'zero_' on node 0 stream 2 writes it while op 1 'sum' on "
                                      "node 0 stream 1 read it"),
            std::string::npos)
      << hazards[0].message();
}

TEST(HazardChecker, WriteAfterWriteIsReported) {
  HazardChecker c;
  EXPECT_TRUE(op(c, kS1, 1, "fill_", write_of(12)).empty());
  const auto hazards = op(c, kDefault, 2, "copy_", write_of(12));
  ASSERT_EQ(hazards.size(), 1u);
  EXPECT_NE(hazards[0].message().find("on node 0 default stream writes it while op 1 'fill_' on node 0 "
                                      "stream 1 wrote it"),
            std::string::npos)
      << hazards[0].message();
  EXPECT_NE(hazards[0].message().find("make the default stream wait on it"), std::string::npos);
}

TEST(HazardChecker, WriteIsCheckedAgainstEveryUnorderedRead) {
  HazardChecker c;
  EXPECT_TRUE(op(c, kS1, 1, "sum", read_of(12)).empty());
  EXPECT_TRUE(op(c, kS2, 2, "mean", read_of(12)).empty());
  sync(c, kS1, kS3);  // orders the read on stream 1 only
  const auto hazards = op(c, kS3, 3, "zero_", write_of(12));
  ASSERT_EQ(hazards.size(), 1u);
  EXPECT_EQ(hazards[0].earlier.stream, kS2);
  EXPECT_EQ(hazards[0].earlier.op_id, 2u);
}

TEST(HazardChecker, SameStreamIsAlwaysOrdered) {
  HazardChecker c;
  for (uint64_t i = 1; i <= 10; ++i) {
    EXPECT_TRUE(op(c, kS1, i, "add_", i % 2 ? write_of(12) : read_of(12)).empty());
  }
}

TEST(HazardChecker, ViewsConflictOnlyWhereTheirBytesOverlap) {
  HazardChecker c;
  EXPECT_TRUE(op(c, kS1, 1, "fill_", write_of(8, 0, 32)).empty());
  EXPECT_TRUE(op(c, kS2, 2, "fill_", write_of(9, 32, 64)).empty());  // adjacent, disjoint
  EXPECT_TRUE(op(c, kS2, 3, "sum", read_of(9, 40, 48)).empty());
  EXPECT_TRUE(op(c, kS1, 4, "sum", read_of(12, 0, 64, 101)).empty());  // another storage
  const auto hazards = op(c, kS2, 5, "sum", read_of(9, 31, 33));
  ASSERT_EQ(hazards.size(), 1u);
  EXPECT_EQ(hazards[0].earlier.tensor_id, 8u);
  EXPECT_EQ(hazards[0].current.tensor_id, 9u);
  EXPECT_NE(hazards[0].message().find("wrote tensor 8 (which shares its memory) with no event wait"),
            std::string::npos)
      << hazards[0].message();
}

TEST(HazardChecker, AWriteInsideAnEarlierWriteKeepsTheRestOfIt) {
  HazardChecker c;
  EXPECT_TRUE(op(c, kS1, 1, "fill_", write_of(1, 0, 100)).empty());
  sync(c, kS1, kS2);
  EXPECT_TRUE(op(c, kS2, 2, "fill_", write_of(2, 40, 60)).empty());
  // Stream 3 waited for neither: each side of the cut names its own writer.
  auto left = op(c, kS3, 3, "sum", read_of(1, 0, 10));
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].earlier.op_id, 1u);
  auto middle = op(c, kS3, 4, "sum", read_of(2, 45, 50));
  ASSERT_EQ(middle.size(), 1u);
  EXPECT_EQ(middle[0].earlier.op_id, 2u);
  auto right = op(c, kS3, 5, "sum", read_of(1, 90, 100));
  ASSERT_EQ(right.size(), 1u);
  EXPECT_EQ(right[0].earlier.op_id, 1u);
  // A read spanning all three parts reports each earlier op once.
  auto all = op(c, kS3, 6, "sum", read_of(1, 0, 100));
  EXPECT_EQ(all.size(), 2u);
}

TEST(HazardChecker, OneHazardPerEarlierOpAndTensorPair) {
  HazardChecker c;
  EXPECT_TRUE(op(c, kS1, 1, "fill_", write_of(12)).empty());
  // An in-place op reads and writes the tensor: one report, not two.
  const Access both[] = {read_of(12), write_of(12)};
  const auto hazards = c.on_op(kS2, 2, "add_", both);
  EXPECT_EQ(hazards.size(), 1u);
}

TEST(HazardChecker, HostWaitAndSynchronizeOrderLaterOps) {
  HazardChecker c;
  EXPECT_TRUE(op(c, kS1, 1, "fill_", write_of(12)).empty());
  EXPECT_TRUE(op(c, kS2, 2, "fill_", write_of(13, 0, 64, 101)).empty());
  c.on_host_wait(c.on_record(kS1));
  EXPECT_TRUE(op(c, kS3, 3, "sum", read_of(12)).empty());     // a stream first seen now
  EXPECT_FALSE(op(c, kS3, 4, "sum", read_of(13, 0, 64, 101)).empty());  // not waited for
  c.on_synchronize();
  EXPECT_TRUE(op(c, kS1, 5, "add_", write_of(13, 0, 64, 101)).empty());
  EXPECT_FALSE(op(c, kDefault, 6, "add_", write_of(13, 0, 64, 101)).empty());  // after op 5
}

TEST(HazardChecker, ClocksCrossNodesSerialized) {
  HazardChecker node0;
  HazardChecker node1;
  const StreamKey remote{1, 2};
  EXPECT_TRUE(op(node0, kS1, 1, "fill_", write_of(12)).empty());
  const std::vector<uint8_t> wire = node0.on_record(kS1).serialize();
  node1.on_wait(remote, VectorClock::deserialize(wire));
  EXPECT_TRUE(node1.clock(remote).covers(kS1, 1));
  // One checker seeing both nodes' streams orders them the same way.
  EXPECT_EQ(op(node0, remote, 2, "send", read_of(12)).size(), 1u);
  node0.on_wait(remote, VectorClock::deserialize(wire));
  EXPECT_TRUE(op(node0, remote, 3, "send", read_of(12)).empty());
}

TEST(HazardChecker, ForgetDropsAStoragesHistory) {
  HazardChecker c;
  EXPECT_TRUE(op(c, kS1, 1, "fill_", write_of(12)).empty());
  EXPECT_TRUE(op(c, kS1, 2, "fill_", write_of(13, 0, 64, 101)).empty());
  EXPECT_EQ(c.tracked_storages(), 2u);
  c.forget(100);
  EXPECT_EQ(c.tracked_storages(), 1u);
  EXPECT_EQ(c.tracked_accesses(), 1u);
  // The freed memory, reused for a new tensor, inherits nothing.
  EXPECT_TRUE(op(c, kS2, 3, "empty", write_of(20)).empty());
  EXPECT_FALSE(op(c, kS2, 4, "sum", read_of(13, 0, 64, 101)).empty());
}

TEST(HazardChecker, HistoryStaysBoundedOverManyOps) {
  HazardChecker c;
  uint64_t id = 0;
  for (int round = 0; round < 500; ++round) {
    // Each stream reads what the other wrote, properly synchronized; plus reads on
    // both streams of a shared input.
    EXPECT_TRUE(op(c, kS1, ++id, "add", write_of(1, 0, 64)).empty());
    EXPECT_TRUE(op(c, kS1, ++id, "sum", read_of(3, 0, 128, 101)).empty());
    sync(c, kS1, kS2);
    EXPECT_TRUE(op(c, kS2, ++id, "mul", read_of(1, 0, 64)).empty());
    EXPECT_TRUE(op(c, kS2, ++id, "mul", read_of(1, 16, 32)).empty());
    EXPECT_TRUE(op(c, kS2, ++id, "sum", read_of(3, 0, 128, 101)).empty());
    EXPECT_TRUE(op(c, kS2, ++id, "mul", write_of(2, 64, 128)).empty());
    sync(c, kS2, kS1);
  }
  EXPECT_EQ(c.tracked_storages(), 2u);
  // Storage 100: the last write plus the last read of each part of it; storage 101:
  // the last read of each stream at most.
  EXPECT_LE(c.tracked_accesses(), 8u);
}

TEST(HazardChecker, ForgetStreamDropsItOnceNothingNamesIt) {
  HazardChecker c;
  const StreamKey temp{0, 9};
  EXPECT_TRUE(op(c, temp, 1, "fill_", write_of(12)).empty());
  sync(c, temp, kS1);
  EXPECT_TRUE(op(c, kS1, 2, "sum", read_of(12)).empty());
  EXPECT_EQ(c.tracked_streams(), 2u);
  c.forget_stream(temp);
  // Its write is still kept: a stream that never waited for it still races.
  EXPECT_EQ(op(c, kS2, 3, "sum", read_of(12)).size(), 1u);
  EXPECT_TRUE(c.clock(kS1).covers(temp, 1));
  c.forget(100);
  EXPECT_EQ(c.tracked_streams(), 2u);  // kS1 and kS2
  EXPECT_EQ(c.clock(kS1).get(temp), 0u);
  // A stream with nothing kept goes at once.
  c.forget_stream(kS2);
  EXPECT_EQ(c.tracked_streams(), 1u);
}

TEST(HazardChecker, MalformedRangeThrowsAndRecordsNothing) {
  HazardChecker c;
  EXPECT_THROW(op(c, kS1, 1, "narrow", read_of(1, 10, 5)), ValueError);
  EXPECT_THROW(op(c, kS1, 1, "narrow", read_of(1, -1, 5)), ValueError);
  EXPECT_EQ(c.tracked_storages(), 0u);
  EXPECT_EQ(c.clock(kS1).get(kS1), 0u);
  EXPECT_TRUE(op(c, kS1, 2, "empty_view", write_of(1, 8, 8)).empty());
  EXPECT_EQ(c.tracked_accesses(), 0u);
}

TEST(HazardChecker, ConcurrentCallersFromSeveralThreads) {
  HazardChecker c;
  constexpr int kThreads = 4;
  constexpr int kOps = 3000;
  constexpr uint64_t kShared = 1;  // written once by the default stream, then read
  constexpr uint64_t kRacy = 2;    // every thread writes it once with no wait
  EXPECT_TRUE(op(c, kDefault, 1, "fill_", write_of(1, 0, 64, kShared)).empty());
  const VectorClock ready = c.on_record(kDefault);

  std::atomic<int> unexpected{0};
  std::atomic<int> racy_reports{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const StreamKey me{0, static_cast<uint32_t>(t + 1)};
      const uint64_t own = 1000 + static_cast<uint64_t>(t);
      c.on_wait(me, ready);
      for (int i = 0; i < kOps; ++i) {
        const uint64_t id = static_cast<uint64_t>(t) * 1000000 + static_cast<uint64_t>(i);
        const Access accesses[] = {read_of(1, 0, 64, kShared), read_of(2, 0, 64, own),
                                   write_of(3, (i % 4) * 16, (i % 4) * 16 + 16, own)};
        if (!c.on_op(me, id, "add", accesses).empty()) unexpected.fetch_add(1);
        if (i % 100 == 0) (void)c.on_record(me);
        if (i == kOps / 2) {
          racy_reports.fetch_add(static_cast<int>(op(c, me, id, "zero_", write_of(9, 0, 8, kRacy)).size()));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(unexpected.load(), 0);
  // Each write after the first races with the write before it (which it replaces).
  EXPECT_EQ(racy_reports.load(), kThreads - 1);
  EXPECT_EQ(c.tracked_storages(), 2u + kThreads);
}

}  // namespace
}  // namespace thd::streams
