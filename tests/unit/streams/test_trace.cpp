#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <thd/error.h>

#include "expect_throw.h"
#include "scoped_env.h"
#include "datachannel/test_util.h"  // TempDir
#include "streams/trace.h"
#include "streams/trace_clock.h"
#include "streams/trace_json.h"
#include "trace_test_json.h"

namespace thd::trace {
namespace {

using test_json::Json;
using test_json::parse_json;

using thd::test::TempDir;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The events of a parsed trace with the given "ph" (and "name", when given).
std::vector<const Json*> events(const Json& trace, const std::string& ph, const std::string& name = "") {
  std::vector<const Json*> out;
  for (const Json& e : trace["traceEvents"].items) {
    if (e["ph"].str() == ph && (name.empty() || e["name"].str() == name)) out.push_back(&e);
  }
  return out;
}

const Json* find_event(const Json& trace, const std::string& ph, const std::string& name, int pid, int tid) {
  for (const Json* e : events(trace, ph, name)) {
    if ((*e)["pid"].num() == std::to_string(pid) && (*e)["tid"].num() == std::to_string(tid)) return e;
  }
  return nullptr;
}

// ---------------------------------------------------------------- the JSON file

// A master and one worker whose clock runs 1 s behind the master's (offset +1e9).
struct TwoProcessTrace {
  Recorder master;
  Recorder worker;
  static constexpr int64_t kWorkerOffset = 1'000'000'000;

  TwoProcessTrace() {
    master.name_process(0, "master", -1);
    master.name_track(0, 0, "main", 0);
    master.slice(0, 0, "send_batch", 1'000'000'000, 1'000'002'500, {{"ops", 3}});
    master.flow(7, 0, 0, 1'000'001'000, FlowPhase::Begin);

    worker.name_process(1, "node 0", 1);
    worker.name_track(1, 0, "stream 0", 0);
    worker.name_track(1, 1, "stream 1", 1);
    // On the master's clock: begins at 1'000'004'321, 1.234567 ms long.
    worker.slice(1, 1, "add", 4'321, 4'321 + 1'234'567,
                 {{"name", "add"}, {"tensors", std::vector<int64_t>{5, 6, 7}},
                  {"shape", std::vector<int64_t>{20, 20}}, {"bytes", size_t{1600}}});
    worker.flow(7, 1, 1, 5'000, FlowPhase::End);
  }
  std::vector<TracePart> parts() const { return {{&master, 0}, {&worker, kWorkerOffset}}; }
};

TEST(TraceJson, WritesNamesSlicesAndFlowsOnTheMastersClock) {
  TwoProcessTrace t;
  TempDir dir;
  const std::string path = dir.file("trace.json");
  write_chrome_trace(path, t.parts());
  const Json trace = parse_json(read_file(path));

  EXPECT_EQ(trace["displayTimeUnit"].str(), "ns");
  // The earliest timestamp, the master's send_batch, is the trace's zero.
  EXPECT_EQ(trace["metadata"]["thd_clock_base_ns"].num(), "1000000000");

  const Json* pname = find_event(trace, "M", "process_name", 1, 0);
  ASSERT_NE(pname, nullptr);
  EXPECT_EQ((*pname)["args"]["name"].str(), "node 0");
  const Json* psort = find_event(trace, "M", "process_sort_index", 0, 0);
  ASSERT_NE(psort, nullptr);
  EXPECT_EQ((*psort)["args"]["sort_index"].num(), "-1");
  const Json* tname = find_event(trace, "M", "thread_name", 1, 1);
  ASSERT_NE(tname, nullptr);
  EXPECT_EQ((*tname)["args"]["name"].str(), "stream 1");
  const Json* tsort = find_event(trace, "M", "thread_sort_index", 1, 1);
  ASSERT_NE(tsort, nullptr);
  EXPECT_EQ((*tsort)["args"]["sort_index"].num(), "1");
  EXPECT_EQ(events(trace, "M", "thread_name").size(), 3u);

  const Json* send = find_event(trace, "X", "send_batch", 0, 0);
  ASSERT_NE(send, nullptr);
  EXPECT_EQ((*send)["ts"].num(), "0.000");
  EXPECT_EQ((*send)["dur"].num(), "2.500");
  EXPECT_EQ((*send)["args"]["ops"].num(), "3");
  const Json* add = find_event(trace, "X", "add", 1, 1);
  ASSERT_NE(add, nullptr);
  EXPECT_EQ((*add)["ts"].num(), "4.321");
  EXPECT_EQ((*add)["dur"].num(), "1234.567");
  EXPECT_EQ((*add)["args"]["name"].str(), "add");
  ASSERT_EQ((*add)["args"]["tensors"].items.size(), 3u);
  EXPECT_EQ((*add)["args"]["tensors"].items[2].num(), "7");
  EXPECT_EQ((*add)["args"]["shape"].items[0].num(), "20");
  EXPECT_EQ((*add)["args"]["bytes"].num(), "1600");

  const auto begins = events(trace, "s");
  const auto ends = events(trace, "f");
  ASSERT_EQ(begins.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  const Json& b = *begins[0];
  const Json& e = *ends[0];
  EXPECT_EQ(b["id"].str(), e["id"].str());
  EXPECT_EQ(b["cat"].str(), e["cat"].str());
  EXPECT_EQ(b["name"].str(), e["name"].str());
  EXPECT_EQ(e["bp"].str(), "e");
  EXPECT_EQ(b["pid"].num(), "0");
  EXPECT_EQ(b["ts"].num(), "1.000");
  EXPECT_EQ(e["pid"].num(), "1");
  EXPECT_EQ(e["tid"].num(), "1");
  EXPECT_EQ(e["ts"].num(), "5.000");  // inside the add slice it binds to

  EXPECT_EQ(trace["metadata"]["thd_dropped_events"].num(), "0");
  EXPECT_TRUE(events(trace, "i").empty());
}

TEST(TraceJson, FileIsPrivateAndReplacedWholeWithNoTemporaryLeft) {
  TwoProcessTrace t;
  TempDir dir;
  const std::string path = dir.file("trace.json");
  { std::ofstream(path) << "old contents"; }
  write_chrome_trace(path, t.parts());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(read_file(path), chrome_trace_json(t.parts()));
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1u);
}

TEST(TraceJson, UnwritablePathThrowsErrorNamingItAndLeavesNothing) {
  TwoProcessTrace t;
  TempDir dir;
  const std::string missing = dir.file("no/such/dir/trace.json");
  THD_EXPECT_THROW_MSG(write_chrome_trace(missing, t.parts()), Error, missing);
  // A directory in the way: the rename fails after the temporary was written.
  const std::string blocked = dir.file("blocked");
  std::filesystem::create_directory(blocked);
  std::filesystem::create_directory(blocked + "/inside");
  THD_EXPECT_THROW_MSG(write_chrome_trace(blocked, t.parts()), Error, blocked);
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1u);  // only "blocked"
}

TEST(TraceJson, EscapesStringsAndReplacesInvalidUtf8) {
  Recorder r;
  const std::string tricky = "q\"b\\s/n\nt\tr\rc\x01\x1f del\x7f";
  const std::string unicode = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";
  // A stray continuation, a cut sequence, an overlong '/', a surrogate, past U+10FFFF.
  const std::string invalid = "a\x80" "b\xe2\x82" "c\xc0\xaf" "d\xed\xa0\x80" "e\xf4\x90\x80\x80";
  r.name_process(0, tricky, 0);
  r.name_track(0, 0, unicode, 0);
  r.slice(0, 0, invalid, 0, 1, {{tricky, tricky}, {"u", unicode}});
  const std::string text = chrome_trace_json({{&r, 0}});
  const Json trace = parse_json(text);  // strict: throws on anything malformed

  EXPECT_NE(text.find(R"(q\"b\\s/n\nt\tr\rc\u0001\u001f del)"), std::string::npos) << text;
  EXPECT_EQ((*find_event(trace, "M", "process_name", 0, 0))["args"]["name"].str(), tricky);
  EXPECT_EQ((*find_event(trace, "M", "thread_name", 0, 0))["args"]["name"].str(), unicode);
  const Json& s = *events(trace, "X")[0];
  EXPECT_EQ(s["args"][tricky].str(), tricky);
  EXPECT_EQ(s["args"]["u"].str(), unicode);
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(s["name"].str(), "a" + fffd + "b" + fffd + fffd + "c" + fffd + fffd + "d" + fffd + fffd + fffd +
                                 "e" + fffd + fffd + fffd + fffd);
}

TEST(TraceJson, ArgumentValuesKeepTheirJsonTypes) {
  Recorder r;
  r.slice(0, 0, "op", 0, 0,
          {{"neg", int64_t{-5}},
           {"big", std::numeric_limits<uint64_t>::max()},
           {"ratio", 0.25},
           {"inf", std::numeric_limits<double>::infinity()},
           {"nan", std::nan("")},
           {"flag", true},
           {"empty", std::vector<int64_t>{}}});
  const Json trace = parse_json(chrome_trace_json({{&r, 0}}));
  const Json& args = (*events(trace, "X")[0])["args"];
  EXPECT_EQ(args["neg"].num(), "-5");
  EXPECT_EQ(args["big"].num(), "18446744073709551615");
  EXPECT_EQ(args["ratio"].num(), "0.25");
  EXPECT_EQ(args["inf"].str(), "inf");
  EXPECT_EQ(args["nan"].str(), "nan");
  EXPECT_EQ(args["flag"].type, Json::Type::Bool);
  EXPECT_TRUE(args["flag"].boolean);
  EXPECT_EQ(args["empty"].type, Json::Type::Array);
  EXPECT_TRUE(args["empty"].items.empty());
}

TEST(TraceJson, TimestampsBeforeTheBaseAndHugeFlowIdsStayExact) {
  Recorder a;
  Recorder b;
  a.slice(0, 0, "late", 10'000, 10'000);
  b.slice(1, 0, "early", 0, 1'001);                  // 3 us before a's slice once offset
  b.flow(UINT64_MAX, 1, 0, 500, FlowPhase::Begin);
  const Json trace = parse_json(chrome_trace_json({{&a, 0}, {&b, 7'000}}));
  EXPECT_EQ((*find_event(trace, "X", "late", 0, 0))["ts"].num(), "3.000");
  EXPECT_EQ((*find_event(trace, "X", "late", 0, 0))["dur"].num(), "0.000");
  EXPECT_EQ((*find_event(trace, "X", "early", 1, 0))["ts"].num(), "0.000");
  EXPECT_EQ((*find_event(trace, "X", "early", 1, 0))["dur"].num(), "1.001");
  EXPECT_EQ((*events(trace, "s")[0])["id"].str(), "0xffffffffffffffff");
  EXPECT_EQ((*events(trace, "s")[0])["ts"].num(), "0.500");
  EXPECT_EQ(trace["metadata"]["thd_clock_base_ns"].num(), "7000");
}

TEST(TraceJson, EmptyTraceIsValidAndBadPartsThrow) {
  const Json none = parse_json(chrome_trace_json({}));
  EXPECT_TRUE(none["traceEvents"].items.empty());
  Recorder empty;
  EXPECT_TRUE(parse_json(chrome_trace_json({{&empty, 5}}))["traceEvents"].items.empty());

  THD_EXPECT_THROW_MSG(chrome_trace_json({{nullptr, 0}}), ValueError, "no recorder");
}

TEST(TraceJson, ExtremeTimestampsAndOffsetsAreWrittenExactly) {
  Recorder r;
  r.slice(0, 0, "last", INT64_MAX - 10, INT64_MAX);
  r.flow(1, 0, 0, INT64_MIN, FlowPhase::Begin);
  const Json trace = parse_json(chrome_trace_json({{&r, -100}}));
  // The flow is the base: INT64_MIN - 100; the slice is 2^64 - 11 ns after it.
  EXPECT_EQ(trace["metadata"]["thd_clock_base_ns"].num(), "-9223372036854775908");
  EXPECT_EQ((*events(trace, "s")[0])["ts"].num(), "0.000");
  EXPECT_EQ((*events(trace, "X")[0])["ts"].num(), "18446744073709551.605");
  EXPECT_EQ((*events(trace, "X")[0])["dur"].num(), "0.010");
}

// The checker the tests above lean on must itself refuse malformed JSON.
TEST(TraceJson, TheStrictCheckerRefusesMalformedJson) {
  EXPECT_NO_THROW(parse_json(R"( {"a":[1,-0.5e+3,"x\u00e9\ud83d\ude00",true,null,{}]} )"));
  for (const char* bad : {"", "{", "[1,]", R"({"a":1,})", R"({"a":1 "b":2})", R"({"a":1,"a":2})", "01",
                          "1.", "-", ".5", "1e", "[1] 2", "tru", R"("\x")", R"("\ud800")", R"("\udc00x")",
                          "\"raw\nnewline\"", "\"tab\there\"", "\"bad\xff\"", "\"over\xc0\xaf\"",
                          "\"cut\xe2\x82\"", "\"unterminated"}) {
    EXPECT_THROW(parse_json(bad), std::runtime_error) << bad;
  }
}

// ---------------------------------------------------------------- the recorder

TEST(TraceRecorder, CapDropsAndCountsAndTheFileSaysSo) {
  Recorder r(true, 10);
  for (int i = 0; i < 15; ++i) r.slice(0, 0, "op", i * 100, i * 100 + 50);
  for (int i = 0; i < 5; ++i) r.flow(static_cast<uint64_t>(i), 0, 0, i, FlowPhase::Begin);
  EXPECT_EQ(r.event_count(), 10u);
  EXPECT_EQ(r.dropped(), 10u);
  const TraceData d = r.snapshot();
  ASSERT_EQ(d.slices.size(), 10u);
  EXPECT_EQ(d.slices.back().begin_ns, 900);  // the first ten were kept
  EXPECT_TRUE(d.flows.empty());

  // Names are bounded too: a new one past the cap is dropped, renaming still works.
  Recorder names(true, 2);
  names.name_track(0, 0, "a", 0);
  names.name_track(0, 1, "b", 0);
  names.name_track(0, 2, "c", 0);
  names.name_track(0, 0, "renamed", 0);
  EXPECT_EQ(names.dropped(), 1u);
  EXPECT_EQ(names.snapshot().tracks.at({0, 0}).name, "renamed");

  Recorder worker = Recorder::deserialize(r.serialize());
  EXPECT_EQ(worker.dropped(), 10u);
  const Json trace = parse_json(chrome_trace_json({{&names, 0}, {&worker, 0}}));
  EXPECT_EQ(trace["metadata"]["thd_dropped_events"].num(), "11");
  EXPECT_EQ(trace["metadata"]["thd_parts"].items[1]["dropped_events"].num(), "10");
  const auto notes = events(trace, "i");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE((*notes[0])["name"].str().find("11 events dropped"), std::string::npos);
}

TEST(TraceRecorder, DisabledRecordsNothing) {
  Recorder r(false);
  EXPECT_FALSE(r.enabled());
  r.name_process(0, "p", 0);
  r.name_track(0, 0, "t", 0);
  r.slice(0, 0, "op", 0, 1);
  r.flow(1, 0, 0, 0, FlowPhase::Begin);
  EXPECT_EQ(r.snapshot(), TraceData{});
}

TEST(TraceRecorder, NegativeIdsAndBackwardsSlices) {
  Recorder r;
  THD_EXPECT_THROW_MSG(r.slice(-1, 0, "op", 0, 1), ValueError, "pid -1");
  THD_EXPECT_THROW_MSG(r.flow(1, 0, -2, 0, FlowPhase::End), ValueError, "tid -2");
  THD_EXPECT_THROW_MSG(r.name_track(0, -3, "t", 0), ValueError, "tid -3");
  r.slice(0, 0, "backwards", 100, 50);
  r.slice(0, 0, "huge", INT64_MIN, INT64_MAX);
  const TraceData d = r.snapshot();
  ASSERT_EQ(d.slices.size(), 2u);
  EXPECT_EQ(d.slices[0].duration_ns, 0);
  EXPECT_EQ(d.slices[1].duration_ns, INT64_MAX);
}

TEST(TraceRecorder, ConcurrentRecordingKeepsEveryEventAndEachThreadsOrder) {
  constexpr int kThreads = 6;
  constexpr int kPerThread = 3000;
  Recorder r;
  Recorder capped(true, 5000);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      r.name_track(1, t, "stream " + std::to_string(t), t);
      for (int i = 0; i < kPerThread; ++i) {
        r.slice(1, t, "op", i, i + 1, {{"i", i}});
        r.flow(static_cast<uint64_t>(t) * kPerThread + static_cast<uint64_t>(i), 1, t, i, FlowPhase::Begin);
        capped.slice(1, t, "op", i, i + 1);
      }
    });
  }
  for (auto& th : threads) th.join();
  const TraceData d = r.snapshot();
  EXPECT_EQ(d.tracks.size(), static_cast<size_t>(kThreads));
  ASSERT_EQ(d.slices.size(), static_cast<size_t>(kThreads * kPerThread));
  ASSERT_EQ(d.flows.size(), static_cast<size_t>(kThreads * kPerThread));
  std::vector<int64_t> next(kThreads, 0);
  for (const Slice& s : d.slices) {
    EXPECT_EQ(s.begin_ns, next[static_cast<size_t>(s.tid)]++);
  }
  EXPECT_EQ(r.dropped(), 0u);
  EXPECT_EQ(capped.event_count(), 5000u);
  EXPECT_EQ(capped.dropped(), static_cast<uint64_t>(kThreads * kPerThread - 5000));
}

// ---------------------------------------------------------------- shipping

TEST(TraceCodec, RoundTripKeepsEverything) {
  TwoProcessTrace t;
  t.worker.slice(1, 0, "mixed", -5, 5,
                 {{"s", std::string("x\0y", 3)}, {"i", int64_t{-1}}, {"u", uint64_t{1} << 63}, {"d", -0.5}, {"b", false},
                  {"l", std::vector<int64_t>{INT64_MIN, 0, INT64_MAX}}, {"nan", std::nan("")}});
  t.worker.flow(UINT64_MAX, 1, 0, INT64_MIN, FlowPhase::Begin);
  const std::vector<uint8_t> bytes = t.worker.serialize();
  const Recorder back = Recorder::deserialize(bytes);
  TraceData expected = t.worker.snapshot();
  TraceData got = back.snapshot();
  // NaN != NaN: compare its bits, then drop it from both.
  ASSERT_TRUE(std::isnan(std::get<double>(got.slices.back().args.back().second.value())));
  expected.slices.back().args.pop_back();
  got.slices.back().args.pop_back();
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(back.enabled());
  EXPECT_EQ(back.serialize().size(), bytes.size());
  EXPECT_EQ(chrome_trace_json({{&back, 3}}), chrome_trace_json({{&t.worker, 3}}));

  const Recorder empty = Recorder::deserialize(Recorder().serialize());
  EXPECT_EQ(empty.snapshot(), TraceData{});
}

TEST(TraceCodec, EveryTruncationThrowsValueError) {
  TwoProcessTrace t;
  const std::vector<uint8_t> bytes = t.worker.serialize();
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(Recorder::deserialize(std::span(bytes.data(), n)), ValueError) << "length " << n;
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  THD_EXPECT_THROW_MSG(Recorder::deserialize(longer), ValueError, "unexpected bytes");
}

TEST(TraceCodec, GarbageAndCorruptionNeverCrash) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> junk(rng() % 64);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    THD_EXPECT_THROW_MSG(Recorder::deserialize(junk), ValueError, "trace data");
  }
  // Every single-byte change of a valid blob: it decodes or throws ValueError.
  TwoProcessTrace t;
  const std::vector<uint8_t> bytes = t.worker.serialize();
  for (size_t pos = 0; pos < bytes.size(); ++pos) {
    for (uint8_t v : {uint8_t{0}, uint8_t{1}, uint8_t{0x7f}, uint8_t{0x80}, uint8_t{0xff}}) {
      std::vector<uint8_t> bad = bytes;
      bad[pos] = v;
      try {
        (void)Recorder::deserialize(bad);
      } catch (const ValueError&) {
      }
    }
  }
}

// Layout offsets of a recorder holding one slice with one IntList arg, no names.
class CodecOffsets : public ::testing::Test {
 protected:
  static constexpr size_t kSliceCount = 8 + 4 + 8 + 4 + 4;  // magic, version, dropped, 2 name counts
  static constexpr size_t kSliceName = kSliceCount + 8 + 4 + 4 + 8 + 8;
  static constexpr size_t kListCount = kSliceName + 4 + 2 + 4 + 4 + 1 + 1;  // "op", nargs, "l", kind

  void SetUp() override {
    r_ = Recorder();
    r_.slice(0, 0, "op", 1, 2, {{"l", std::vector<int64_t>{1, 2}}});
    bytes_ = r_.serialize();
    ASSERT_EQ(bytes_[kListCount - 1], 5u);  // the IntList kind byte: the layout is as assumed
    ASSERT_EQ(bytes_[kListCount], 2u);
  }
  void put_u32(size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes_[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
  }
  void put_u64(size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes_[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
  }

  Recorder r_;
  std::vector<uint8_t> bytes_;
};

TEST_F(CodecOffsets, HugeLengthsAreRefusedBeforeAllocating) {
  put_u64(kSliceCount, UINT64_MAX / 2);
  THD_EXPECT_THROW_MSG(Recorder::deserialize(bytes_), ValueError, "slices count");
  SetUp();
  put_u32(kSliceName, UINT32_MAX);
  THD_EXPECT_THROW_MSG(Recorder::deserialize(bytes_), ValueError, "truncated");
  SetUp();
  put_u32(kListCount, 0x40000000);
  THD_EXPECT_THROW_MSG(Recorder::deserialize(bytes_), ValueError, "list argument count");
}

TEST_F(CodecOffsets, BadFieldsAreNamed) {
  bytes_[0] = 'X';
  THD_EXPECT_THROW_MSG(Recorder::deserialize(bytes_), ValueError, "bad magic");
  SetUp();
  bytes_[8] = 9;
  THD_EXPECT_THROW_MSG(Recorder::deserialize(bytes_), ValueError, "version 9");
  SetUp();
  put_u32(kSliceCount + 8, 0xffffffff);  // pid
  THD_EXPECT_THROW_MSG(Recorder::deserialize(bytes_), ValueError, "negative pid");
  SetUp();
  put_u64(kSliceCount + 8 + 4 + 4 + 8, UINT64_MAX);  // duration
  THD_EXPECT_THROW_MSG(Recorder::deserialize(bytes_), ValueError, "negative slice duration");
  SetUp();
  bytes_[kListCount - 1] = 42;
  THD_EXPECT_THROW_MSG(Recorder::deserialize(bytes_), ValueError, "unknown argument kind 42");
  SetUp();
  Recorder f;
  f.flow(1, 0, 0, 0, FlowPhase::End);
  std::vector<uint8_t> flow_bytes = f.serialize();
  flow_bytes.back() = 2;
  THD_EXPECT_THROW_MSG(Recorder::deserialize(flow_bytes), ValueError, "unknown flow phase 2");
}

// ---------------------------------------------------------------- clocks, env

TEST(TraceClock, PicksTheSampleWithTheSmallestRoundTrip) {
  // The worker's clock reads 250 us less than the master's.
  const std::vector<ClockSample> samples = {
      {1'000'000, 900'000, 1'300'000},  // rtt 300 us, skewed reply
      {2'000'000, 1'750'100, 2'000'200},  // rtt 200 ns: the best
      {3'000'000, 2'760'000, 3'050'000},  // rtt 50 us
      {4'000'000, 3'000'000, 4'000'200},  // the same rtt, later: the first one wins
  };
  const ClockOffset o = estimate_offset(samples);
  EXPECT_EQ(o.round_trip_ns, 200);
  EXPECT_EQ(o.offset_ns, 2'000'100 - 1'750'100);
  const ClockOffset single = estimate_offset(std::span(samples).subspan(2, 1));
  EXPECT_EQ(single.round_trip_ns, 50'000);
  EXPECT_EQ(single.offset_ns, 3'025'000 - 2'760'000);
  // Extreme but valid clocks do not overflow.
  const ClockSample far{INT64_MAX - 10, -100, INT64_MAX};
  EXPECT_THROW(estimate_offset(std::span(&far, 1)), ValueError);
  const ClockSample edge{INT64_MAX - 10, INT64_MAX - 5, INT64_MAX};
  EXPECT_EQ(estimate_offset(std::span(&edge, 1)).offset_ns, 0);
}

TEST(TraceClock, NoSamplesOrTimeRunningBackwardsThrow) {
  THD_EXPECT_THROW_MSG(estimate_offset({}), ValueError, "no clock samples");
  const std::vector<ClockSample> bad = {{10, 5, 20}, {100, 5, 90}};
  THD_EXPECT_THROW_MSG(estimate_offset(bad), ValueError, "clock sample 1");
}

TEST(TraceClock, NowIsTheSteadyClockInNanoseconds) {
  const int64_t a = now_ns();
  const int64_t steady = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  const int64_t b = now_ns();
  EXPECT_LE(a, steady);
  EXPECT_LE(steady, b);
}

// THD_TRACE is read by nothing else in this binary; the guard restores it.
TEST(TraceEnv, PathComesFromThdTraceAndEmptyMeansOff) {
  test::ScopedEnv guard("THD_TRACE", nullptr);
  EXPECT_EQ(trace_path_from_env(), std::nullopt);
  ::setenv("THD_TRACE", "", 1);
  EXPECT_EQ(trace_path_from_env(), std::nullopt);
  ::setenv("THD_TRACE", "/tmp/job trace.json", 1);
  EXPECT_EQ(trace_path_from_env(), "/tmp/job trace.json");
}

}  // namespace
}  // namespace thd::trace
