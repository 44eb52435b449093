// The libfabric MessagePipe on the providers that run on one host: tcp (the
// ofi_rxm;tcp stack) and shm, skipped with a message where fi_getinfo finds it
// unusable. Ranks run as threads over one HashStore, each driving its own pipe;
// one test forks a rank to kill it.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <thd/store.h>

#include "datachannel/libfabric/endpoint.h"
#include "datachannel/libfabric/in_process_peers.h"
#include "datachannel/libfabric/libfabric_pipe.h"
#include "datachannel/libfabric/tag_layout.h"
#include "datachannel/pipe/pipe_test_util.h"
#include "datachannel/transport_test_util.h"

namespace thd {
namespace {

using namespace std::chrono_literals;
using detail::libfabric::make_pipe;
using detail::libfabric::PipeSettings;
using detail::libfabric::TagLayout;
using detail::pipe::MessagePipe;
using detail::pipe::PipeOp;
using net::Clock;
using test::holds;
using test::in;
using test::pattern;
using test::what;
using PipePtr = std::unique_ptr<MessagePipe>;
using test::options_for;
using test::TestOp;

// ---- helpers ------------------------------------------------------------------

// Drives the pipe the way PipeTransport does (progress, arm, sleep) until
// `finished` holds or the timeout passes; false on timeout.
bool drive_until(MessagePipe& pipe, const std::function<bool()>& finished, std::chrono::milliseconds timeout = 10s) {
  const net::Deadline deadline = in(timeout);
  while (!finished()) {
    if (Clock::now() >= deadline) return false;
    if (pipe.progress() > 0) continue;
    if (finished()) break;
    if (pipe.arm()) pipe.sleep(std::min(deadline, in(50ms)), true);
  }
  return true;
}

// Drives until `op` finishes; on timeout withdraws it where the pipe can, so a
// failed test does not leave the pipe holding an op about to go out of scope.
bool drive(MessagePipe& pipe, TestOp& op, std::chrono::milliseconds timeout = 10s) {
  if (drive_until(
          pipe, [&] { return op.finished(); }, timeout))
    return true;
  pipe.cancel(&op);
  return false;
}

// Expects `op` to have succeeded with `bytes`.
void expect_ok(const TestOp& op, size_t bytes, const std::string& label) {
  ASSERT_TRUE(op.finished()) << label << ": did not finish";
  EXPECT_EQ(op.calls(), 1) << label;
  EXPECT_EQ(op.error(), nullptr) << label << ": " << what(op.error());
  EXPECT_EQ(op.bytes(), bytes) << label;
}


// A world's pipes, made concurrently (each waits for the others' addresses) and
// destroyed concurrently (each destructor progresses its own endpoint while it
// says goodbye).
class World {
 public:
  World(int size, const PipeSettings& settings) : pipes_(static_cast<size_t>(size)) {
    auto store = std::make_shared<HashStore>(test::kLong);
    test::run_ranks(size,
                    [&](int r) { pipes_[static_cast<size_t>(r)] = make_pipe(options_for(store, r, size), settings); });
  }
  // One rank at a time, in rank order, while the ranks still to go keep driving
  // their pipes: each reads the goodbyes of those before it, so it never sends to
  // a closed endpoint. (With shm, endpoints in one process share their mappings,
  // and a send to a closed one would touch freed memory.)
  ~World() {
    std::atomic<int> gone{0};
    test::run_rank_threads(size(), [&](int r) {
      PipePtr& pipe = pipes_[static_cast<size_t>(r)];
      if (pipe) drive_until(*pipe, [&] { return gone.load() == r; });
      pipe.reset();
      // Only ranks after this one are still alive (and stay so until `gone` moves on).
      for (int other = r + 1; other < size(); ++other) {
        if (pipes_[static_cast<size_t>(other)]) pipes_[static_cast<size_t>(other)]->interrupt();
      }
      gone.fetch_add(1);
    });
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int size() const { return static_cast<int>(pipes_.size()); }
  MessagePipe& operator[](int r) { return *pipes_[static_cast<size_t>(r)]; }
  PipePtr& owner(int r) { return pipes_[static_cast<size_t>(r)]; }

  // Runs body(rank, pipe) on a thread per rank. A rank that is done keeps driving
  // its pipe until every rank is (a large send needs both sides' progress).
  void run(const std::function<void(int, MessagePipe&)>& body) {
    std::atomic<int> arrived{0};
    test::run_ranks(size(), [&](int r) {
      MessagePipe& pipe = (*this)[r];
      body(r, pipe);
      arrived.fetch_add(1);
      for (int other = 0; other < size(); ++other) (*this)[other].interrupt();
      EXPECT_TRUE(drive_until(pipe, [&] { return arrived.load() == size(); }))
          << "rank " << r << " waiting for the others";
    });
  }

 private:
  std::vector<PipePtr> pipes_;
};

double process_cpu_ms() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// Whether a provider can be opened here; the reason when not.
std::string unusable_reason(const std::string& provider) {
  static std::map<std::string, std::string> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(provider);
  if (it != cache.end()) return it->second;
  std::string reason;
  try {
    auto store = std::make_shared<HashStore>(test::kLong);
    PipePtr p = make_pipe(options_for(store, 0, 1), PipeSettings{provider, false});
  } catch (const ConnectionError& e) {
    reason = e.what();
  }
  return cache[provider] = reason;
}

// The first of tcp and shm usable here; empty when neither is.
std::string any_usable_provider() {
  for (const char* p : {"tcp", "shm"}) {
    if (unusable_reason(p).empty()) return p;
  }
  return "";
}

class LibfabricPipe : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string reason = unusable_reason(GetParam());
    if (!reason.empty()) GTEST_SKIP() << "libfabric provider '" << GetParam() << "' is not usable here: " << reason;
  }
  PipeSettings settings(bool always_register = false) const { return PipeSettings{GetParam(), always_register}; }
};

// ---- set-up -------------------------------------------------------------------

TEST(LibfabricPipeSetUp, BadOptionsAreRefusedClearly) {
  auto store = std::make_shared<HashStore>(test::kShort);
  THD_EXPECT_THROW_MSG(make_pipe(options_for(nullptr, 0, 2)), ValueError, "store is required");
  THD_EXPECT_THROW_MSG(make_pipe(options_for(store, 2, 2)), ValueError, "rank 2 is out of range for a world of 2");
  THD_EXPECT_THROW_MSG(make_pipe(options_for(store, -1, 2)), ValueError, "rank -1 is out of range");
  THD_EXPECT_THROW_MSG(make_pipe(options_for(store, 0, 0)), ValueError, "world_size must be at least 1");
  THD_EXPECT_THROW_MSG(make_pipe(options_for(store, 0, 1, 0ms)), ValueError, "timeout must be positive");
}

TEST(LibfabricPipeSetUp, UnknownProviderIsAConnectionErrorWithAHint) {
  auto store = std::make_shared<HashStore>(test::kShort);
  try {
    make_pipe(options_for(store, 0, 1), PipeSettings{"no-such-provider", false});
    FAIL() << "expected a ConnectionError";
  } catch (const ConnectionError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("fi_getinfo"), std::string::npos) << m;
    EXPECT_NE(m.find("No data available"), std::string::npos) << m;  // libfabric's own words
    EXPECT_NE(m.find("no-such-provider"), std::string::npos) << m;
    EXPECT_NE(m.find("FI_PROVIDER=tcp"), std::string::npos) << m;
  }
}

TEST(LibfabricPipeSetUp, MissingPeerAddressTimesOutNamingTheRank) {
  const std::string provider = any_usable_provider();
  if (provider.empty()) GTEST_SKIP() << "neither tcp nor shm is usable here: " << unusable_reason("tcp");
  auto store = std::make_shared<HashStore>(test::kShort);
  const auto start = Clock::now();
  try {
    make_pipe(options_for(store, 0, 3, 300ms), PipeSettings{provider, false});
    FAIL() << "expected a TimeoutError";
  } catch (const TimeoutError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("ranks 1, 2"), std::string::npos) << m;
  }
  EXPECT_LT(Clock::now() - start, 3s);

  // One rank of three arrives: the error names the other alone, as its peer.
  auto store2 = std::make_shared<HashStore>(test::kShort);
  std::thread other([&] {
    try {
      make_pipe(options_for(store2, 1, 3, 300ms), PipeSettings{provider, false});
    } catch (const TimeoutError&) {
    }
  });
  try {
    make_pipe(options_for(store2, 0, 3, 300ms), PipeSettings{provider, false});
    ADD_FAILURE() << "expected a TimeoutError";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("address of rank 2:"), std::string::npos) << e.what();
    EXPECT_EQ(e.context().peer, 2);
  }
  other.join();
}

TEST(LibfabricPipeSetUp, ProvidersMustAgree) {
  if (!unusable_reason("tcp").empty() || !unusable_reason("shm").empty()) GTEST_SKIP() << "needs tcp and shm";
  auto store = std::make_shared<HashStore>(test::kLong);
  auto errors = test::run_rank_threads(2, [&](int r) {
    make_pipe(options_for(store, r, 2, 2s), PipeSettings{r == 0 ? "tcp" : "shm", false});
  });
  for (int r = 0; r < 2; ++r) {
    std::string m;
    EXPECT_TRUE(holds<ConnectionError>(errors[static_cast<size_t>(r)], &m)) << what(errors[static_cast<size_t>(r)]);
    EXPECT_NE(m.find("set FI_PROVIDER to the same provider on every rank"), std::string::npos) << m;
  }
}

// make_pipe(options) alone: libfabric's own choice, narrowed by FI_PROVIDER.
TEST(LibfabricPipeSetUp, DefaultSettingsMoveAMessage) {
  auto store = std::make_shared<HashStore>(test::kLong);
  std::vector<PipePtr> pipes(2);
  test::run_ranks(2, [&](int r) { pipes[static_cast<size_t>(r)] = make_pipe(options_for(store, r, 2)); });
  const std::vector<uint8_t> data = pattern(300, 12);
  std::vector<uint8_t> got(300);
  TestOp sent, received;
  pipes[1]->recv(0, 4, got, &received);
  pipes[0]->send(1, 4, data, &sent);
  EXPECT_TRUE(drive_until(*pipes[0], [&] {
    pipes[1]->progress();
    return sent.finished() && received.finished();
  }));
  expect_ok(sent, 300, "send");
  expect_ok(received, 300, "recv");
  EXPECT_TRUE(got == data);
  test::run_rank_threads(2, [&](int r) { pipes[static_cast<size_t>(r)].reset(); });
}

TEST(LibfabricTagLayout, SenderAboveTheTagOn64Bits) {
  const int bits = TagLayout::usable_bits(0xaaaaaaaaaaaaaaaaULL);
  EXPECT_EQ(bits, 64);
  const auto layout = TagLayout::make(bits, 3);
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(layout->max_tag(), UINT32_MAX);
  EXPECT_EQ(layout->data_tag(2, 5), (uint64_t{2} << 32) | 5);
  EXPECT_EQ(layout->sender_of(layout->data_tag(2, UINT32_MAX)), 2);
  EXPECT_EQ(layout->sender_of(layout->goodbye_tag(1)), 1);
  // A goodbye never looks like data, and the goodbye receive matches any sender's.
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(layout->goodbye_tag(r), layout->data_tag(r, 0));
    EXPECT_EQ(layout->goodbye_tag(r) & ~layout->goodbye_ignore(), layout->goodbye_tag(0));
  }
  EXPECT_EQ(layout->data_tag(1, 0) & ~layout->goodbye_ignore(), 0u);
}

TEST(LibfabricTagLayout, NarrowProvidersGetFewerTagBitsOrNone) {
  EXPECT_EQ(TagLayout::usable_bits(0), 64);
  const auto narrow = TagLayout::make(40, 8);  // 1 goodbye bit + 3 rank bits leave 36: 32 used
  ASSERT_TRUE(narrow.has_value());
  EXPECT_EQ(narrow->max_tag(), UINT32_MAX);
  const auto tight = TagLayout::make(24, 4);  // 24 - 1 - 2 = 21 tag bits
  ASSERT_TRUE(tight.has_value());
  EXPECT_EQ(tight->max_tag(), (1u << 21) - 1);
  EXPECT_EQ(tight->sender_of(tight->data_tag(3, 77)), 3);
  EXPECT_FALSE(TagLayout::make(20, 64).has_value());  // 20 - 1 - 6 = 13 < 15
}


// ---- the native layout (thd's point-to-point envelopes in the provider's tag) ----

detail::Envelope native_envelope(int64_t tag, uint8_t dtype = detail::kRawBytes, uint32_t group = 1) {
  detail::Envelope e;
  e.context = detail::p2p_context(group);
  e.tag = tag;
  e.kind.dtype = dtype;
  return e;
}

TEST(LibfabricNativeLayout, FieldsAreSizedFromTheProvidersBitsAndTheWorld) {
  using detail::libfabric::NativeLayout;
  const auto wide = NativeLayout::make(*TagLayout::make(64, 4));
  ASSERT_TRUE(wide.has_value());
  EXPECT_EQ(wide->tag_bits(), 31);
  EXPECT_EQ(wide->group_bits(), 24);
  EXPECT_EQ(wide->sender_bits(), 2);
  EXPECT_EQ(wide->native_bit(), uint64_t{1} << 62);
  // A large world takes sender bits from the group.
  const auto many = NativeLayout::make(*TagLayout::make(64, 1 << 20));
  ASSERT_TRUE(many.has_value());
  EXPECT_EQ(many->sender_bits(), 20);
  EXPECT_EQ(many->tag_bits(), 29);
  EXPECT_EQ(many->group_bits(), 8);
  // Narrow providers: fewer tag bits, or no native matching at all (24 bits: the
  // pipe's 21-bit tags and 2 rank bits reach the native bit, 22).
  const auto narrow = NativeLayout::make(*TagLayout::make(40, 4));
  ASSERT_TRUE(narrow.has_value());
  EXPECT_EQ(narrow->tag_bits(), 23);
  EXPECT_EQ(narrow->group_bits(), 8);
  EXPECT_EQ(narrow->native_bit(), uint64_t{1} << 38);
  EXPECT_FALSE(NativeLayout::make(*TagLayout::make(24, 4)).has_value());
  // Every layout keeps the pipe's own tags (data and goodbye) clear of the native bit.
  for (int world : {1, 2, 3, 64, 1 << 20}) {
    const auto pipe = *TagLayout::make(64, world);
    const auto native = NativeLayout::make(pipe);
    ASSERT_TRUE(native.has_value()) << world;
    EXPECT_EQ(pipe.data_tag(world - 1, UINT32_MAX) & native->native_bit(), 0u) << world;
    EXPECT_EQ(pipe.goodbye_tag(world - 1) & native->native_bit(), 0u) << world;
    EXPECT_EQ((native->tag_mask() | native->group_mask() | native->sender_mask() | native->dtype_mask()) &
                  native->native_bit(),
              0u);
  }
}

TEST(LibfabricNativeLayout, PacksWhatFitsAndRefusesTheRest) {
  using detail::libfabric::NativeLayout;
  const auto layout = *NativeLayout::make(*TagLayout::make(64, 3));
  const auto f32 = static_cast<uint8_t>(DType::Float32);
  const auto tag = layout.tag_of(native_envelope(1234, f32, 77), 2);
  ASSERT_TRUE(tag.has_value());
  const NativeLayout::Fields f = layout.unpack(*tag);
  EXPECT_EQ(f, (NativeLayout::Fields{static_cast<uint32_t>(DType::Float32), 2, 77, 1234}));
  EXPECT_EQ(layout.unpack(*layout.tag_of(native_envelope(5), 0)).dtype, NativeLayout::kRawBytesCode);
  EXPECT_TRUE(layout.tag_of(native_envelope(INT32_MAX), 0).has_value());
  // Refused, not aliased: a tag or group past its field, a negative tag, a
  // collective's envelope, a sender past the world's bits.
  EXPECT_FALSE(layout.tag_of(native_envelope(int64_t{1} << 31), 0).has_value());
  EXPECT_FALSE(layout.tag_of(native_envelope(-1), 0).has_value());
  EXPECT_FALSE(layout.tag_of(native_envelope(5, detail::kRawBytes, 1U << 24), 0).has_value());
  detail::Envelope collective = native_envelope(5);
  collective.context = detail::collective_context(1);
  EXPECT_FALSE(layout.tag_of(collective, 0).has_value());
  detail::Envelope rooted = native_envelope(5);
  rooted.kind.root = 0;
  EXPECT_FALSE(layout.tag_of(rooted, 0).has_value());
  EXPECT_FALSE(layout.tag_of(native_envelope(5), 4).has_value());

  // A receive matches any dtype; from one sender or, from any, every sender.
  const auto from2 = layout.match(native_envelope(1234, detail::kRawBytes, 77), 2);
  EXPECT_EQ(*tag & from2.mask, from2.tag & from2.mask);
  EXPECT_NE(*layout.tag_of(native_envelope(1234, f32, 77), 1) & from2.mask, from2.tag & from2.mask);
  EXPECT_NE(*layout.tag_of(native_envelope(1235, f32, 77), 2) & from2.mask, from2.tag & from2.mask);
  EXPECT_NE(*layout.tag_of(native_envelope(1234, f32, 78), 2) & from2.mask, from2.tag & from2.mask);
  const auto any = layout.match(native_envelope(1234, detail::kRawBytes, 77), kAnySource);
  for (int sender = 0; sender < 3; ++sender) {
    EXPECT_EQ(*layout.tag_of(native_envelope(1234, f32, 77), sender) & any.mask, any.tag & any.mask) << sender;
  }
  // The pipe's own tags never match a native receive.
  const auto pipe = *TagLayout::make(64, 3);
  EXPECT_NE(pipe.data_tag(2, 1234) & any.mask, any.tag & any.mask);
}

// ---- messages -----------------------------------------------------------------

TEST_P(LibfabricPipe, SendsAndReceivesSmallAndLargeMessages) {
  World world(2, settings());
  EXPECT_EQ(world[0].name(), "libfabric");
  EXPECT_GE(world[0].max_tag(), 32767u);
  const std::vector<size_t> sizes = {8, 64 << 10, 16 << 20};
  world.run([&](int r, MessagePipe& pipe) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const auto tag = static_cast<uint32_t>(i + 1);
      const std::vector<uint8_t> data = pattern(sizes[i], static_cast<uint32_t>(i));
      TestOp op;
      if (r == 0) {
        pipe.send(1, tag, data, &op);
        ASSERT_TRUE(drive(pipe, op)) << "send of " << sizes[i];
        expect_ok(op, sizes[i], "send");
      } else {
        std::vector<uint8_t> got(sizes[i]);
        pipe.recv(0, tag, got, &op);
        ASSERT_TRUE(drive(pipe, op)) << "recv of " << sizes[i];
        expect_ok(op, sizes[i], "recv");
        EXPECT_TRUE(got == data) << "the " << sizes[i] << "-byte message arrived changed";
      }
    }
  });
}

TEST_P(LibfabricPipe, SendsFromAndReceivesIntoRegisteredMemory) {
  World world(2, settings(/*always_register=*/true));
  const std::vector<size_t> sizes = {8, 64 << 10, 4 << 20};
  world.run([&](int r, MessagePipe& pipe) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      const std::vector<uint8_t> data = pattern(sizes[i], static_cast<uint32_t>(i + 10));
      TestOp op;
      std::vector<uint8_t> got(sizes[i]);
      if (r == 0) {
        pipe.send(1, 3, data, &op);
      } else {
        pipe.recv(0, 3, got, &op);
      }
      ASSERT_TRUE(drive(pipe, op));
      expect_ok(op, sizes[i], r == 0 ? "send" : "recv");
      if (r == 1) {
        EXPECT_TRUE(got == data) << sizes[i];
      }
    }
  });
}

TEST_P(LibfabricPipe, KeepsSendOrderOnOneTag) {
  World world(2, settings());
  constexpr int kCount = 60;
  // Mostly small messages, every tenth past the eager limit of the providers.
  const auto size_of = [](int i) -> size_t {
    return i % 10 == 9 ? (256 << 10) + static_cast<size_t>(i) : 16 + static_cast<size_t>(i);
  };
  world.run([&](int r, MessagePipe& pipe) {
    std::vector<std::vector<uint8_t>> bufs(kCount);
    std::vector<TestOp> ops(kCount);
    for (int i = 0; i < kCount; ++i) {
      if (r == 0) {
        bufs[static_cast<size_t>(i)] = pattern(size_of(i), static_cast<uint32_t>(i));
        pipe.send(1, 7, bufs[static_cast<size_t>(i)], &ops[static_cast<size_t>(i)]);
      } else {
        bufs[static_cast<size_t>(i)].resize(size_of(i));
        pipe.recv(0, 7, bufs[static_cast<size_t>(i)], &ops[static_cast<size_t>(i)]);
      }
    }
    ASSERT_TRUE(drive_until(
        pipe, [&] { return std::all_of(ops.begin(), ops.end(), [](const TestOp& o) { return o.finished(); }); }));
    for (int i = 0; i < kCount; ++i) {
      expect_ok(ops[static_cast<size_t>(i)], size_of(i), "message " + std::to_string(i));
      if (r == 1) {
        EXPECT_TRUE(bufs[static_cast<size_t>(i)] == pattern(size_of(i), static_cast<uint32_t>(i)))
            << "message " << i << " is out of order";
      }
    }
  });
}

TEST_P(LibfabricPipe, SendAtOnceInjectsSmallMessagesInOrderWithSend) {
  // send_at_once is fi_tinject: the provider copies the message before the call
  // returns (the buffer is overwritten at once here) and it keeps its place among
  // the sends on the same tag. A provider refuses it (-FI_EAGAIN) until its
  // connection to the peer is up, so one message goes through send() first; after
  // that both providers here inject 56 bytes (tcp: up to 64, shm: 4096).
  World world(2, settings());
  const std::vector<uint8_t> hello = pattern(8, 20), first = pattern(56, 21), second = pattern(64 << 10, 22),
                             third = pattern(40, 23);
  world.run([&](int r, MessagePipe& pipe) {
    if (r == 0) {
      std::vector<TestOp> sends(3);
      pipe.send(1, 5, hello, &sends[0]);
      ASSERT_TRUE(drive(pipe, sends[0]));
      std::vector<uint8_t> scratch = first;
      EXPECT_TRUE(pipe.send_at_once(1, 5, scratch)) << "a 56-byte message was not injected on a connection in use";
      std::fill(scratch.begin(), scratch.end(), 0xee);
      pipe.send(1, 5, second, &sends[1]);
      scratch = third;
      // Refused while the large send waits in the pipe's queue, which it would overtake.
      const bool third_injected = pipe.send_at_once(1, 5, scratch);
      std::fill(scratch.begin(), scratch.end(), 0xee);
      if (!third_injected) pipe.send(1, 5, third, &sends[2]);
      ASSERT_TRUE(drive(pipe, sends[1]));
      expect_ok(sends[1], second.size(), "the send between the injected ones");
      if (!third_injected) {
        ASSERT_TRUE(drive(pipe, sends[2]));
      }
    } else {
      for (const std::vector<uint8_t>* want : {&hello, &first, &second, &third}) {
        std::vector<uint8_t> got(want->size());
        TestOp op;
        pipe.recv(0, 5, got, &op);
        ASSERT_TRUE(drive(pipe, op));
        expect_ok(op, want->size(), "message of " + std::to_string(want->size()) + " bytes");
        EXPECT_TRUE(got == *want) << "the " << want->size() << "-byte message arrived changed or out of order";
      }
    }
  });
}

TEST_P(LibfabricPipe, SendAtOnceRefusesWhatItCannotInjectAndSendsNothing) {
  World world(2, settings());
  const std::vector<uint8_t> big = pattern(1 << 20, 24), small = pattern(8, 25);
  world.run([&](int r, MessagePipe& pipe) {
    if (r == 0) {
      EXPECT_FALSE(pipe.send_at_once(1, 6, big)) << "1 MiB is past every provider's inject size";
      EXPECT_THROW(pipe.send_at_once(0, 6, small), ValueError);
      EXPECT_THROW(pipe.send_at_once(2, 6, small), ValueError);
      TestOp op;
      pipe.send(1, 6, small, &op);
      ASSERT_TRUE(drive(pipe, op));
    } else {
      std::vector<uint8_t> got(big.size());
      TestOp op;
      pipe.recv(0, 6, got, &op);
      ASSERT_TRUE(drive(pipe, op));
      expect_ok(op, small.size(), "the first message on the tag (the refused one must not have gone)");
    }
  });
}

TEST_P(LibfabricPipe, TagsAreIndependent) {
  World world(2, settings());
  std::atomic<bool> posted{false};
  world.run([&](int r, MessagePipe& pipe) {
    const std::vector<uint8_t> one = pattern(100, 1), two = pattern(100, 2);
    if (r == 1) {
      std::vector<uint8_t> got1(100), got2(100);
      TestOp op1, op2;
      pipe.recv(0, 2, got2, &op2);  // tag 2 first
      pipe.recv(0, 1, got1, &op1);
      posted = true;
      ASSERT_TRUE(drive(pipe, op1));
      expect_ok(op1, 100, "recv tag 1");
      EXPECT_TRUE(got1 == one);
      EXPECT_FALSE(op2.finished()) << "the tag-2 receive took the tag-1 message";
      ASSERT_TRUE(drive(pipe, op2));
      expect_ok(op2, 100, "recv tag 2");
      EXPECT_TRUE(got2 == two);
    } else {
      ASSERT_TRUE(drive_until(pipe, [&] { return posted.load(); }));
      TestOp op1, op2;
      pipe.send(1, 1, one, &op1);  // tag 1 arrives first
      ASSERT_TRUE(drive(pipe, op1));
      std::this_thread::sleep_for(50ms);  // let rank 1 see tag 1 alone
      pipe.send(1, 2, two, &op2);
      ASSERT_TRUE(drive(pipe, op2));
      expect_ok(op1, 100, "send tag 1");
      expect_ok(op2, 100, "send tag 2");
    }
  });
}

TEST_P(LibfabricPipe, ReceivesMessagesPostedBeforeAndAfterTheReceive) {
  World world(2, settings());
  std::atomic<int> step{0};
  const std::vector<uint8_t> early = pattern(1000, 5), late = pattern(1000, 6), big = pattern(1 << 20, 7);
  world.run([&](int r, MessagePipe& pipe) {
    if (r == 0) {
      TestOp a, b, c;
      pipe.send(1, 4, early, &a);  // before any receive: unexpected at rank 1
      ASSERT_TRUE(drive(pipe, a));
      pipe.send(1, 5, big, &b);  // a large one, also before its receive
      step = 1;
      ASSERT_TRUE(drive_until(pipe, [&] { return step.load() == 2; }));
      pipe.send(1, 4, late, &c);  // after rank 1 posted its receive
      ASSERT_TRUE(drive_until(pipe, [&] { return b.finished() && c.finished(); }));
      expect_ok(a, early.size(), "early send");
      expect_ok(b, big.size(), "big send");
      expect_ok(c, late.size(), "late send");
    } else {
      ASSERT_TRUE(drive_until(pipe, [&] { return step.load() == 1; }));
      std::this_thread::sleep_for(50ms);  // the messages are here before the receives
      std::vector<uint8_t> got_early(1000), got_big(1 << 20), got_late(1000);
      TestOp a, b, c;
      pipe.recv(0, 4, got_early, &a);
      pipe.recv(0, 5, got_big, &b);
      ASSERT_TRUE(drive_until(pipe, [&] { return a.finished() && b.finished(); }));
      expect_ok(a, early.size(), "unexpected small");
      expect_ok(b, big.size(), "unexpected large");
      EXPECT_TRUE(got_early == early);
      EXPECT_TRUE(got_big == big);
      pipe.recv(0, 4, got_late, &c);
      step = 2;
      ASSERT_TRUE(drive(pipe, c));
      expect_ok(c, late.size(), "expected");
      EXPECT_TRUE(got_late == late);
    }
  });
}

TEST_P(LibfabricPipe, ZeroLengthMessages) {
  World world(2, settings());
  world.run([&](int r, MessagePipe& pipe) {
    TestOp a, b;
    std::vector<uint8_t> room(16, 0xee);
    if (r == 0) {
      pipe.send(1, 9, {}, &a);
      pipe.send(1, 9, {}, &b);
    } else {
      pipe.recv(0, 9, std::span<uint8_t>(), &a);
      pipe.recv(0, 9, room, &b);  // room to spare: still 0 bytes
    }
    ASSERT_TRUE(drive_until(pipe, [&] { return a.finished() && b.finished(); }));
    expect_ok(a, 0, "first");
    expect_ok(b, 0, "second");
    EXPECT_EQ(room, std::vector<uint8_t>(16, 0xee));
  });
}

// Sends `sent` bytes into a receive of `room` (< sent): the receive fails with a
// ValueError naming the sizes (the message's where it is known: always when it is
// short enough to land in the pipe's own buffer) and writes nothing past its
// buffer; then a message on the same tag arrives whole (the pipe is still in step).
void expect_truncation(World& world, size_t sent, size_t room, bool size_known) {
  constexpr uint32_t kTag = 20;
  world.run([&](int r, MessagePipe& pipe) {
    TestOp op;
    if (r == 0) {
      const std::vector<uint8_t> data = pattern(sent, 3);
      pipe.send(1, kTag, data, &op);
      ASSERT_TRUE(drive(pipe, op)) << "send of " << sent;
      EXPECT_EQ(op.calls(), 1);  // the sender's side of it is the provider's to report
    } else {
      std::vector<uint8_t> buf(room + 64, 0xab);  // guard bytes after the receive's span
      pipe.recv(0, kTag, std::span<uint8_t>(buf.data(), room), &op);
      ASSERT_TRUE(drive(pipe, op)) << "receive of " << sent << " into " << room;
      std::string m;
      ASSERT_TRUE(holds<ValueError>(op.error(), &m)) << what(op.error());
      // The receive's size always; the message's where the provider reports it.
      EXPECT_NE(m.find("receive buffer of " + std::to_string(room) + " bytes"), std::string::npos) << m;
      if (size_known || m.find("does not say how long") == std::string::npos) {
        EXPECT_NE(m.find("message of " + std::to_string(sent) + " bytes"), std::string::npos) << m;
      }
      EXPECT_TRUE(
          std::all_of(buf.begin() + static_cast<std::ptrdiff_t>(room), buf.end(), [](uint8_t b) { return b == 0xab; }))
          << "the receive of " << sent << " bytes wrote past its buffer";
    }
    const std::vector<uint8_t> marker = pattern(64, 99);
    TestOp next;
    std::vector<uint8_t> got(64);
    if (r == 0) {
      pipe.send(1, kTag, marker, &next);
    } else {
      pipe.recv(0, kTag, got, &next);
    }
    ASSERT_TRUE(drive(pipe, next)) << "the message after the truncated one";
    expect_ok(next, 64, "marker");
    if (r == 1) {
      EXPECT_TRUE(got == marker);
    }
  });
}

TEST_P(LibfabricPipe, ALongerMessageFailsTheReceiveWithoutOverrun) {
  World world(2, settings());
  expect_truncation(world, 100, 10, /*size_known=*/true);
  expect_truncation(world, 16 << 10, 16, /*size_known=*/true);  // the largest that lands in the pipe's buffer
}

// Truncated by the provider itself: a message above the pipe's landing size into a
// receive that is shorter still. shm (1.17) spins forever inside fi_cq_read on
// that (its CMA copy loops on the dropped tail; the SAR path hangs too), so it is
// left out. PipeTransport never posts a receive shorter than the message it
// announced (docs/backend_libfabric.md).
TEST_P(LibfabricPipe, ALongerLargeMessageFailsTheReceiveWithoutOverrun) {
  if (GetParam() == "shm")
    GTEST_SKIP() << "shm (libfabric 1.17) hangs on a truncated message above its inject size (4 KiB)";
  World world(2, settings());
  expect_truncation(world, 100, 10, /*size_known=*/true);
  expect_truncation(world, 1 << 20, 256 << 10, /*size_known=*/false);
}

TEST_P(LibfabricPipe, CancelWithdrawsAnUnmatchedReceive) {
  World world(2, settings());
  std::atomic<bool> cancelled{false};
  world.run([&](int r, MessagePipe& pipe) {
    const std::vector<uint8_t> data = pattern(200, 8);
    if (r == 1) {
      std::vector<uint8_t> first(200), second(200);
      TestOp withdrawn;
      pipe.recv(0, 11, first, &withdrawn);
      pipe.progress();
      EXPECT_TRUE(pipe.cancel(&withdrawn));
      cancelled = true;
      TestOp op;
      pipe.recv(0, 11, second, &op);
      ASSERT_TRUE(drive(pipe, op));
      expect_ok(op, 200, "the receive after the cancelled one");
      EXPECT_TRUE(second == data);
      EXPECT_EQ(withdrawn.calls(), 0) << "done() for a withdrawn receive";
      EXPECT_EQ(first, std::vector<uint8_t>(200, 0)) << "a withdrawn receive was written";
      EXPECT_FALSE(pipe.cancel(&op)) << "cancel of a finished op";
    } else {
      ASSERT_TRUE(drive_until(pipe, [&] { return cancelled.load(); }));
      TestOp op;
      pipe.send(1, 11, data, &op);
      ASSERT_TRUE(drive(pipe, op));
      expect_ok(op, 200, "send");
    }
  });
}

TEST_P(LibfabricPipe, WorldOfOneHasNoPeers) {
  auto store = std::make_shared<HashStore>(test::kShort);
  PipePtr pipe = make_pipe(options_for(store, 0, 1), settings());
  EXPECT_EQ(pipe->size(), 1);
  EXPECT_EQ(pipe->progress(), 0);
  EXPECT_EQ(pipe->peer_error(0), nullptr);
  TestOp op;
  std::vector<uint8_t> data(4);
  THD_EXPECT_THROW_MSG(pipe->send(0, 1, data, &op), ValueError, "not another rank");
  THD_EXPECT_THROW_MSG(pipe->recv(1, 1, data, &op), ValueError, "not another rank");
  EXPECT_EQ(op.calls(), 0);
}

TEST_P(LibfabricPipe, WorldOfThreeAllToAll) {
  World world(3, settings());
  world.run([&](int r, MessagePipe& pipe) {
    constexpr size_t kBytes = 100 << 10;
    std::vector<std::vector<uint8_t>> out(3), in_(3);
    std::vector<TestOp> sends(3), recvs(3);
    for (int p = 0; p < 3; ++p) {
      if (p == r) continue;
      const auto i = static_cast<size_t>(p);
      out[i] = pattern(kBytes, static_cast<uint32_t>(r * 10 + p));
      in_[i].resize(kBytes);
      pipe.recv(p, static_cast<uint32_t>(p), in_[i], &recvs[i]);  // tag: the sender's rank
      pipe.send(p, static_cast<uint32_t>(r), out[i], &sends[i]);
    }
    ASSERT_TRUE(drive_until(pipe, [&] {
      for (int p = 0; p < 3; ++p) {
        if (p != r && (!sends[static_cast<size_t>(p)].finished() || !recvs[static_cast<size_t>(p)].finished()))
          return false;
      }
      return true;
    }));
    for (int p = 0; p < 3; ++p) {
      if (p == r) continue;
      const auto i = static_cast<size_t>(p);
      expect_ok(sends[i], kBytes, "send");
      expect_ok(recvs[i], kBytes, "recv");
      EXPECT_TRUE(in_[i] == pattern(kBytes, static_cast<uint32_t>(p * 10 + r))) << "rank " << r << " from " << p;
    }
  });
}

// ---- sleeping -------------------------------------------------------------------

// Arms the pipe (progressing while it says there may be work); false if it never arms.
bool arm(MessagePipe& pipe) {
  for (int i = 0; i < 1000; ++i) {
    if (pipe.arm()) return true;
    pipe.progress();
  }
  return false;
}

TEST_P(LibfabricPipe, SleepReturnsOnInterrupt) {
  World world(2, settings());
  MessagePipe& pipe = world[0];
  ASSERT_TRUE(arm(pipe));
  pipe.interrupt();  // before: the next sleep returns at once
  auto start = Clock::now();
  pipe.sleep(in(5s), false);
  EXPECT_LT(Clock::now() - start, 500ms);

  std::thread waker([&] {
    std::this_thread::sleep_for(100ms);
    pipe.interrupt();
  });
  start = Clock::now();
  bool woke = false;
  int sleeps = 0;
  // A pipe without a wait object naps (growing to a few ms); one with blocks
  // until the interrupt. Either way it sees it well before 5 s, without spinning.
  while (Clock::now() - start < 5s && !woke) {
    ASSERT_TRUE(arm(pipe));
    pipe.sleep(start + 5s, false);
    ++sleeps;
    woke = Clock::now() - start >= 90ms;
  }
  waker.join();
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_LT(sleeps, 100) << "sleep() returned early again and again";
}

TEST_P(LibfabricPipe, SleepReturnsWhenDataArrives) {
  World world(2, settings());
  MessagePipe& receiver = world[1];
  std::vector<uint8_t> got(32);
  TestOp op;
  receiver.recv(0, 1, got, &op);
  std::thread sender([&] {
    std::this_thread::sleep_for(100ms);
    const std::vector<uint8_t> data = pattern(32, 1);
    TestOp s;
    world[0].send(1, 1, data, &s);
    drive(world[0], s);
  });
  const auto start = Clock::now();
  int sleeps = 0;
  while (!op.finished() && Clock::now() - start < 5s) {
    receiver.progress();
    if (op.finished()) break;
    if (receiver.arm()) {
      receiver.sleep(start + 5s, false);
      ++sleeps;
    }
  }
  const auto took = Clock::now() - start;
  sender.join();
  expect_ok(op, 32, "recv");
  EXPECT_LT(took, 1s) << "the receiver slept through the message";
  EXPECT_GE(sleeps, 1);
  EXPECT_LT(sleeps, 100) << "sleep() returned early again and again";
}

TEST_P(LibfabricPipe, IdleSleepKeepsItsDeadlineWithoutBurningCpu) {
  World world(2, settings());
  MessagePipe& pipe = world[1];
  std::vector<uint8_t> got(32);
  TestOp op;
  pipe.recv(0, 1, got, &op);  // pending, never sent: like the transport's control receive

  // One sleep keeps its deadline (a napping provider returns early, never late).
  auto start = Clock::now();
  ASSERT_TRUE(arm(pipe));
  pipe.sleep(start + 100ms, false);
  EXPECT_LT(Clock::now() - start, 600ms);

  // 200 ms of the waiter's loop: well under 50 ms of CPU for the whole process.
  const double cpu_before = process_cpu_ms();
  start = Clock::now();
  const auto until = start + 200ms;
  while (Clock::now() < until) {
    pipe.progress();
    if (pipe.arm()) pipe.sleep(until, false);
  }
  const double cpu = process_cpu_ms() - cpu_before;
  EXPECT_LT(cpu, 50.0) << "ms of CPU while idle for 200 ms";
  EXPECT_FALSE(op.finished());
  EXPECT_TRUE(pipe.cancel(&op));
}

// ---- lost peers -------------------------------------------------------------------

TEST_P(LibfabricPipe, DestroyedPeerFailsPendingAndLaterOpsWithPeerLost) {
  World world(2, settings());
  MessagePipe& survivor = world[1];
  const std::vector<uint8_t> last = pattern(48, 4);
  // Rank 0's last words, sent before it goes: still delivered afterwards.
  {
    TestOp s;
    world[0].send(1, 6, last, &s);
    // The first message between two ranks needs both sides' progress.
    ASSERT_TRUE(drive_until(world[0], [&] {
      survivor.progress();
      return s.finished();
    }));
    expect_ok(s, 48, "last words");
  }
  std::vector<uint8_t> buf(64);
  TestOp pending;
  survivor.recv(0, 1, buf, &pending);
  survivor.progress();
  EXPECT_EQ(survivor.peer_error(0), nullptr);

  std::thread destroyer([&] { world.owner(0).reset(); });
  const auto start = Clock::now();
  const bool failed = drive(survivor, pending, 10s);
  destroyer.join();
  ASSERT_TRUE(failed) << "the pending receive from a destroyed peer never failed";
  EXPECT_LT(Clock::now() - start, 5s);
  std::string m;
  ErrorContext ctx;
  ASSERT_TRUE(holds<PeerLost>(pending.error(), &m, &ctx)) << what(pending.error());
  EXPECT_EQ(ctx.peer, 0);
  EXPECT_NE(m.find("rank 0"), std::string::npos) << m;
  EXPECT_NE(survivor.peer_error(0), nullptr);

  // What rank 0 sent before leaving is still there ...
  std::vector<uint8_t> got(48);
  TestOp before;
  survivor.recv(0, 6, got, &before);
  ASSERT_TRUE(drive(survivor, before));
  expect_ok(before, 48, "the message sent before the peer left");
  EXPECT_TRUE(got == last);
  // ... and nothing else: later ops fail at once, and nothing is injected.
  EXPECT_FALSE(survivor.send_at_once(0, 1, last));
  TestOp send_after, recv_after;
  survivor.send(0, 1, last, &send_after);
  EXPECT_TRUE(send_after.finished()) << "a send to a lost peer did not fail at once";
  EXPECT_TRUE(holds<PeerLost>(send_after.error())) << what(send_after.error());
  survivor.recv(0, 2, buf, &recv_after);
  ASSERT_TRUE(drive(survivor, recv_after, 2s));
  EXPECT_TRUE(holds<PeerLost>(recv_after.error())) << what(recv_after.error());
}

// shm reaches an endpoint of the same process through that endpoint's own memory.
// A rank that sends to a peer thread whose pipe has just closed (its goodbye not
// read yet) must touch nothing freed: the closed endpoint stays open until no
// pipe of this process has it as a peer (in_process_peers.h), so the sends end
// (delivered to an endpoint nobody reads, or PeerLost) and the process lives on.
TEST_P(LibfabricPipe, SendsToAClosedPeerOfThisProcessTouchNothingFreed) {
  if (!detail::libfabric::shares_in_process_peers(GetParam())) {
    GTEST_SKIP() << "libfabric provider '" << GetParam() << "' does not reach in-process peers through their memory";
  }
  using detail::libfabric::Lifeline;
  const size_t enrolled_before = Lifeline::enrolled();
  auto world_owner = std::make_unique<World>(2, settings());
  World& world = *world_owner;
  EXPECT_EQ(Lifeline::enrolled(), enrolled_before + 2);
  {
    // The first message between two ranks needs both sides' progress.
    TestOp s, r;
    std::vector<uint8_t> got(16);
    const std::vector<uint8_t> first = pattern(16, 1);  // read by the send until it finishes
    world[1].recv(0, 1, got, &r);
    world[0].send(1, 1, first, &s);
    ASSERT_TRUE(drive_until(world[0], [&] {
      world[1].progress();
      return s.finished() && r.finished();
    }));
    expect_ok(s, 16, "first message");
  }
  world.owner(1).reset();  // rank 0 reads nothing meanwhile: it has not seen the goodbye
  MessagePipe& survivor = world[0];
  EXPECT_EQ(survivor.peer_error(1), nullptr);
  const std::vector<uint8_t> small = pattern(64, 2);
  EXPECT_TRUE(survivor.send_at_once(1, 2, small));
  TestOp s;
  survivor.send(1, 3, small, &s);
  ASSERT_TRUE(drive(survivor, s, 5s)) << "a send to a closed in-process peer never ended";
  EXPECT_TRUE(s.error() == nullptr || holds<PeerLost>(s.error())) << what(s.error());
  // The goodbye is read in the end, and the peer is lost from then on.
  ASSERT_TRUE(drive_until(survivor, [&] { return survivor.peer_error(1) != nullptr; }, 5s));
  TestOp after;
  survivor.send(1, 4, small, &after);
  EXPECT_TRUE(after.finished() && holds<PeerLost>(after.error())) << what(after.error());
  // Rank 1's endpoint, parked, closes with the last pipe that had it as a peer.
  EXPECT_EQ(Lifeline::enrolled(), enrolled_before + 2);
  world_owner.reset();
  EXPECT_EQ(Lifeline::enrolled(), enrolled_before) << "a parked endpoint outlived every pipe of its world";
}

// A large message into a shorter receive hangs shm (1.17) inside fi_cq_read: its
// pipe says so, and PipeEngine then never posts one (it receives a payload it
// discards whole).
TEST_P(LibfabricPipe, SaysWhetherItTruncatesLargeMessagesSafely) {
  World world(1, settings());
  EXPECT_EQ(world[0].truncates_safely(), GetParam() != "shm");
}

// A peer whose process dies says no goodbye, and tcp;ofi_rxm (libfabric 1.17) does
// not report the broken connection either: it closes it quietly and the next send
// waits for a reconnection whose refusal it never reads. So a send to a killed
// peer either fails with PeerLost (a provider that reports it) or stays pending
// without a false success, the pipe stays usable, and destroying it is bounded.
// PipeTransport's deadlines end the user's wait (docs/backend_libfabric.md).
TEST(LibfabricPipeCrash, KilledPeerNeverLooksLikeASuccessAndTeardownIsBounded) {
  if (!unusable_reason("tcp").empty()) GTEST_SKIP() << unusable_reason("tcp");
  test::TempDir dir;
  const std::string path = dir.file("store");
  test::Children children;
  const pid_t child = children.spawn([&] {
    auto store = std::make_shared<FileStore>(path, -1, test::kLong);
    PipePtr pipe = make_pipe(options_for(store, 1, 2), PipeSettings{"tcp", false});
    std::vector<uint8_t> buf(16);
    TestOp op;
    pipe->recv(0, 1, buf, &op);
    if (!drive(*pipe, op)) return 2;
    store->set("child/ready", "1");
    for (;;) {  // serve until killed
      pipe->progress();
      if (pipe->arm()) pipe->sleep(in(100ms), false);
    }
  });
  auto store = std::make_shared<FileStore>(path, -1, test::kLong);
  PipePtr pipe = make_pipe(options_for(store, 0, 2), PipeSettings{"tcp", false});
  const std::vector<uint8_t> hello = pattern(16, 1);
  TestOp first;
  pipe->send(1, 1, hello, &first);
  ASSERT_TRUE(drive(*pipe, first));
  expect_ok(first, 16, "hello");
  store->wait({"child/ready"}, test::kLong);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  children.wait_all();
  std::this_thread::sleep_for(100ms);  // the kernel has reset the connection

  const std::vector<uint8_t> data = pattern(64 << 10, 2);
  TestOp op;
  pipe->send(1, 2, data, &op);
  drive(*pipe, op, 1s);
  if (op.finished()) {
    ErrorContext ctx;
    EXPECT_TRUE(holds<PeerLost>(op.error(), nullptr, &ctx)) << "a send to a killed peer: " << what(op.error());
    EXPECT_EQ(ctx.peer, 1);
    EXPECT_EQ(pipe->peer_error(1), op.error());
  } else {
    EXPECT_EQ(pipe->peer_error(1), nullptr);
    EXPECT_FALSE(pipe->cancel(&op)) << "a send handed to the provider cannot be withdrawn";
  }
  const auto start = Clock::now();
  pipe.reset();
  EXPECT_LT(Clock::now() - start, 4s) << "teardown with a send stuck on a dead peer";
  EXPECT_LE(op.calls(), 1);
}


// ---- messages matched by libfabric itself (send_tagged, recv_tagged, probe_tagged) ----

uint64_t native_tag_of(const MessagePipe& pipe, int64_t tag, int sender, uint8_t dtype = detail::kRawBytes) {
  return *pipe.native_tag(native_envelope(tag, dtype), sender);
}

#define THD_SKIP_UNLESS_NATIVE(world)                                                                     \
  if (!(world)[0].matches_natively())                                                                     \
  GTEST_SKIP() << "libfabric provider '" << GetParam() << "' does not match natively (it answers no FI_PEEK)"

bool all_finished(const std::vector<TestOp>& ops) {
  return std::all_of(ops.begin(), ops.end(), [](const TestOp& o) { return o.finished(); });
}

// Native matching needs 64 tag bits (both providers have them) and FI_PEEK:
// tcp;ofi_rxm answers a peek inside fi_trecvmsg; shm (libfabric 1.17) takes it and
// never answers, so its pipe keeps every message on the control path.
TEST_P(LibfabricPipe, MatchesNativelyWhereTheProviderAnswersAPeek) {
  const auto start = Clock::now();
  World world(2, settings());
  EXPECT_LT(Clock::now() - start, 2s) << "making the pipes waited on the peek";
  const bool expected = GetParam() == "tcp";
  EXPECT_EQ(world[0].matches_natively(), expected);
  EXPECT_EQ(world[1].matches_natively(), expected);
  if (!expected) return;
  EXPECT_TRUE(world[0].native_tag(native_envelope(5), 1).has_value());
  detail::Envelope collective = native_envelope(5);
  collective.context = detail::collective_context(1);
  collective.kind = {detail::MessageOp::AllReduce, static_cast<uint8_t>(DType::Float32), 0, -1, 100};
  const auto tag = world[0].native_tag(collective, 1);
  ASSERT_TRUE(tag.has_value()) << "collectives are matched by the provider too";
  EXPECT_EQ(*tag >> 62, 3U) << "both top bits mark a collective's tag";
  EXPECT_EQ(world[0].native_origin(*tag).sender, 1);
}

TEST_P(LibfabricPipe, TaggedReceivesMatchTheirSenderOrAnyAndLearnTheSendersTag) {
  World world(3, settings());
  THD_SKIP_UNLESS_NATIVE(world);
  const auto f32 = static_cast<uint8_t>(DType::Float32);
  const std::vector<uint8_t> from0 = pattern(40, 1), from2 = pattern(24, 2);
  const std::vector<uint8_t> first = pattern(1 << 20, 3), second = pattern(8, 4), piped = pattern(8, 5);
  std::atomic<bool> rank2_sent{false}, rank1_checked{false};
  world.run([&](int r, MessagePipe& pipe) {
    if (r == 2) {
      TestOp s;
      pipe.send_tagged(1, native_tag_of(pipe, 5, 2, f32), from2, &s);
      ASSERT_TRUE(drive(pipe, s));
      expect_ok(s, from2.size(), "rank 2's send");
      rank2_sent = true;
      return;
    }
    if (r == 0) {
      // Only once rank 1 has seen its receive from rank 0 (posted first) leave
      // rank 2's message to the receive from rank 2.
      ASSERT_TRUE(drive_until(pipe, [&] { return rank1_checked.load(); }));
      std::vector<TestOp> ops(4);
      pipe.send_tagged(1, native_tag_of(pipe, 5, 0), from0, &ops[0]);
      pipe.send(1, 6, piped, &ops[1]);  // a pipe message on the same peer: never taken by a tagged receive
      pipe.send_tagged(1, native_tag_of(pipe, 6, 0), first, &ops[2]);
      pipe.send_tagged(1, native_tag_of(pipe, 6, 0), second, &ops[3]);
      ASSERT_TRUE(drive_until(pipe, [&] { return all_finished(ops); }));
      for (const TestOp& op : ops) EXPECT_EQ(op.error(), nullptr) << what(op.error());
      return;
    }
    std::vector<uint8_t> in0(64), in2(64), a(1 << 20), b(1 << 20), pipe_in(8);
    uint64_t tag0 = 0, tag2 = 0, tag_a = 0, tag_b = 0;
    std::vector<TestOp> ops(5);
    const auto want0 = pipe.native_match(native_envelope(5), 0);
    const auto want2 = pipe.native_match(native_envelope(5), 2);
    pipe.recv_tagged(0, want0.tag, want0.mask, in0, &tag0, &ops[0]);
    ASSERT_TRUE(drive_until(pipe, [&] { return rank2_sent.load(); }));
    drive_until(pipe, [] { return false; }, 50ms);
    EXPECT_FALSE(ops[0].finished()) << "the receive from rank 0 took rank 2's message";
    rank1_checked = true;
    pipe.recv_tagged(2, want2.tag, want2.mask, in2, &tag2, &ops[1]);
    // From any rank, in the sender's order, eager and rendezvous sizes alike.
    const auto any = pipe.native_match(native_envelope(6), kAnySource);
    pipe.recv_tagged(-1, any.tag, any.mask, a, &tag_a, &ops[2]);
    pipe.recv_tagged(-1, any.tag, any.mask, b, &tag_b, &ops[3]);
    pipe.recv(0, 6, pipe_in, &ops[4]);
    ASSERT_TRUE(drive_until(pipe, [&] { return all_finished(ops); }));
    expect_ok(ops[0], from0.size(), "from rank 0");
    expect_ok(ops[1], from2.size(), "from rank 2");
    expect_ok(ops[2], first.size(), "the first from any rank");
    expect_ok(ops[3], second.size(), "the second from any rank");
    expect_ok(ops[4], piped.size(), "the pipe message");
    EXPECT_TRUE(std::equal(from0.begin(), from0.end(), in0.begin()));
    EXPECT_TRUE(std::equal(from2.begin(), from2.end(), in2.begin()));
    EXPECT_TRUE(a == first);
    EXPECT_TRUE(std::equal(second.begin(), second.end(), b.begin()));
    EXPECT_TRUE(pipe_in == piped);
    EXPECT_EQ(pipe.native_origin(tag0).sender, 0);
    EXPECT_EQ(pipe.native_origin(tag0).dtype, detail::kRawBytes);
    EXPECT_EQ(pipe.native_origin(tag2).sender, 2);
    EXPECT_EQ(pipe.native_origin(tag2).dtype, f32);
    EXPECT_EQ(pipe.native_origin(tag_a).sender, 0);
  });
}

TEST_P(LibfabricPipe, TaggedMessagesOnOneTagLandInTheirOwnReceives) {
  World world(2, settings());
  THD_SKIP_UNLESS_NATIVE(world);
  constexpr int kCount = 120;
  // Alternating small (eager) and large (rendezvous) sizes.
  const auto size_of = [](int i) -> size_t {
    return i % 2 == 1 ? (256 << 10) + static_cast<size_t>(i) : 16 + static_cast<size_t>(i);
  };
  std::atomic<bool> half_sent{false};
  world.run([&](int r, MessagePipe& pipe) {
    std::vector<std::vector<uint8_t>> bufs(kCount);
    std::vector<uint64_t> tags(kCount);
    std::vector<TestOp> ops(kCount);
    if (r == 0) {
      for (int i = 0; i < kCount; ++i) {
        bufs[static_cast<size_t>(i)] = pattern(size_of(i), static_cast<uint32_t>(i));
        pipe.send_tagged(1, native_tag_of(pipe, 3, 0), bufs[static_cast<size_t>(i)], &ops[static_cast<size_t>(i)]);
        if (i == kCount / 2 - 1) {
          // The first half reaches rank 1 (unexpected: the small ones whole, the
          // large ones announced) before any receive is posted there.
          drive_until(pipe, [] { return false; }, 200ms);
          half_sent = true;
        }
      }
    } else {
      ASSERT_TRUE(drive_until(pipe, [&] { return half_sent.load(); }));
      const auto want = pipe.native_match(native_envelope(3), 0);
      for (int i = 0; i < kCount; ++i) {
        bufs[static_cast<size_t>(i)].resize(size_of(i));
        pipe.recv_tagged(0, want.tag, want.mask, bufs[static_cast<size_t>(i)], &tags[static_cast<size_t>(i)],
                         &ops[static_cast<size_t>(i)]);
      }
    }
    ASSERT_TRUE(drive_until(pipe, [&] { return all_finished(ops); }, 30s));
    for (int i = 0; i < kCount; ++i) {
      expect_ok(ops[static_cast<size_t>(i)], size_of(i), "message " + std::to_string(i));
      if (r == 1) {
        EXPECT_TRUE(bufs[static_cast<size_t>(i)] == pattern(size_of(i), static_cast<uint32_t>(i)))
            << "message " << i << " landed in another receive";
      }
    }
  });
}

TEST_P(LibfabricPipe, ATaggedReceiveOfALongerMessageFailsNamingBothLengthsAndStillLearnsItsTag) {
  World world(2, settings());
  THD_SKIP_UNLESS_NATIVE(world);
  // Eager (into the landing buffer), segmented (rxm's SAR, 16-128 KiB) and
  // rendezvous sizes.
  for (size_t sent_size : {size_t{100}, size_t{96} << 10, size_t{1} << 20}) {
    const size_t room = sent_size / 3;
    constexpr size_t kGuard = 4096;
    world.run([&](int r, MessagePipe& pipe) {
      if (r == 0) {
        const std::vector<uint8_t> out = pattern(sent_size, 6);
        TestOp sent;
        pipe.send_tagged(1, native_tag_of(pipe, 7, 0), out, &sent);
        ASSERT_TRUE(drive(pipe, sent));
        return;
      }
      std::vector<uint8_t> in(room + kGuard, 0xab);
      const auto want = pipe.native_match(native_envelope(7), 0);
      uint64_t got = 0;
      TestOp received;
      pipe.recv_tagged(0, want.tag, want.mask, std::span<uint8_t>(in.data(), room), &got, &received);
      ASSERT_TRUE(drive(pipe, received));
      std::string message;
      EXPECT_TRUE(holds<ValueError>(received.error(), &message)) << what(received.error());
      EXPECT_NE(message.find(std::to_string(room)), std::string::npos) << message;
      EXPECT_NE(message.find(std::to_string(sent_size)), std::string::npos) << message;
      EXPECT_EQ(received.bytes(), sent_size) << "the caller is told the message's length";
      EXPECT_EQ(got, native_tag_of(pipe, 7, 0));
      for (size_t i = room; i < in.size(); ++i) ASSERT_EQ(in[i], 0xab) << "byte " << i << " was written";
    });
  }
}

TEST_P(LibfabricPipe, ProbeTaggedSeesTheNextMessageAndLeavesIt) {
  World world(2, settings());
  THD_SKIP_UNLESS_NATIVE(world);
  for (size_t size : {size_t{300}, size_t{1} << 20}) {
    std::atomic<bool> taken{false};
    world.run([&](int r, MessagePipe& pipe) {
      const std::vector<uint8_t> out = pattern(size, 7);
      if (r == 0) {
        TestOp sent;
        pipe.send_tagged(1, native_tag_of(pipe, 8, 0), out, &sent);
        ASSERT_TRUE(drive_until(pipe, [&] { return sent.finished() || taken.load(); }));
        ASSERT_TRUE(drive(pipe, sent));
        return;
      }
      const auto any = pipe.native_match(native_envelope(8), kAnySource);
      const auto other = pipe.native_match(native_envelope(9), kAnySource);
      std::optional<MessagePipe::Probed> seen;
      ASSERT_TRUE(drive_until(pipe, [&] { return (seen = pipe.probe_tagged(any.tag, any.mask)).has_value(); }));
      EXPECT_EQ(seen->length, out.size());
      EXPECT_EQ(seen->tag, native_tag_of(pipe, 8, 0));
      EXPECT_FALSE(pipe.probe_tagged(other.tag, other.mask).has_value()) << "another tag's probe found it";
      // Still there: seen again, and a receive of exactly its length takes it.
      ASSERT_TRUE(pipe.probe_tagged(any.tag, any.mask).has_value());
      std::vector<uint8_t> in(seen->length);
      uint64_t got = 0;
      TestOp received;
      pipe.recv_tagged(0, seen->tag, ~uint64_t{0}, in, &got, &received);
      ASSERT_TRUE(drive(pipe, received));
      taken = true;
      expect_ok(received, out.size(), "the probed message");
      EXPECT_TRUE(in == out);
      EXPECT_FALSE(pipe.probe_tagged(any.tag, any.mask).has_value()) << "taken, yet still seen";
    });
  }
}

TEST_P(LibfabricPipe, TaggedSendsReachThisRankItself) {
  World world(2, settings());
  THD_SKIP_UNLESS_NATIVE(world);
  MessagePipe& pipe = world[0];
  const std::vector<uint8_t> small = pattern(12, 8), large = pattern(1 << 20, 9);
  std::vector<uint8_t> a(small.size()), b(large.size());
  uint64_t tag_a = 0, tag_b = 0;
  std::vector<TestOp> ops(4);
  pipe.send_tagged(0, native_tag_of(pipe, 4, 0), small, &ops[0]);
  pipe.send_tagged(0, native_tag_of(pipe, 4, 0), large, &ops[1]);
  const auto want = pipe.native_match(native_envelope(4), 0);
  pipe.recv_tagged(0, want.tag, want.mask, a, &tag_a, &ops[2]);
  pipe.recv_tagged(0, want.tag, want.mask, b, &tag_b, &ops[3]);
  ASSERT_TRUE(drive_until(pipe, [&] { return all_finished(ops); }));
  expect_ok(ops[2], small.size(), "the small self-message");
  expect_ok(ops[3], large.size(), "the large self-message");
  EXPECT_TRUE(a == small);
  EXPECT_TRUE(b == large);
  EXPECT_EQ(pipe.native_origin(tag_b).sender, 0);
}

TEST_P(LibfabricPipe, ATaggedReceiveFromALostPeerFailsAndOneFromAnyRankIsLeftToItsCaller) {
  World world(2, settings());
  THD_SKIP_UNLESS_NATIVE(world);
  MessagePipe& survivor = world[0];
  const auto from1 = survivor.native_match(native_envelope(9), 1);
  const auto any = survivor.native_match(native_envelope(9), kAnySource);
  std::vector<uint8_t> a(8), b(8);
  uint64_t tag_a = 0, tag_b = 0;
  TestOp pending, pending_any;
  survivor.recv_tagged(1, from1.tag, from1.mask, a, &tag_a, &pending);
  survivor.recv_tagged(-1, any.tag, any.mask, b, &tag_b, &pending_any);
  std::thread destroyer([&] { world.owner(1).reset(); });
  const bool failed = drive(survivor, pending, 10s);
  destroyer.join();
  ASSERT_TRUE(failed) << "the tagged receive from the destroyed rank is still pending";
  ErrorContext ctx;
  EXPECT_TRUE(holds<PeerLost>(pending.error(), nullptr, &ctx)) << what(pending.error());
  EXPECT_EQ(ctx.peer, 1);
  EXPECT_FALSE(pending_any.finished());
  EXPECT_TRUE(survivor.cancel(&pending_any));
  // Later tagged ops on the lost peer fail; a send fails at once.
  TestOp send_after;
  survivor.send_tagged(1, native_tag_of(survivor, 9, 0), b, &send_after);
  EXPECT_TRUE(send_after.finished());
  EXPECT_TRUE(holds<PeerLost>(send_after.error())) << what(send_after.error());
}

INSTANTIATE_TEST_SUITE_P(Providers, LibfabricPipe, ::testing::Values("tcp", "shm"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace thd

namespace thd::detail::libfabric {
namespace {

// The tcp provider picks its listening port itself, and fi_enable failed with
// EADDRINUSE when another process took it first (a clean-clone CI run, under
// load). Endpoint::open tries again with fresh endpoints, and when every try
// finds the port taken it says so. Here the provider is held to one port that a
// socket of this test already listens on (fi_endpoint then fails with
// EADDRNOTAVAIL). In a child process of its own: the provider reads its port range
// once per process.
TEST(LibfabricEndpointDeathTest, AnEnableRefusedForATakenPortIsTriedAgainThenNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof(addr);
        if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
            ::listen(listener, 1) != 0 || ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
          std::exit(2);
        }
        const std::string port = std::to_string(ntohs(addr.sin_port));
        ::setenv("FI_TCP_PORT_LOW_RANGE", port.c_str(), 1);
        ::setenv("FI_TCP_PORT_HIGH_RANGE", port.c_str(), 1);
        ::setenv("THD_LOG_LEVEL", "debug", 1);
        try {
          Endpoint e = Endpoint::open({.rank = 0, .world_size = 2, .provider = "tcp", .bind_host = "127.0.0.1"});
        } catch (const ConnectionError& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::exit(3);
        }
        std::exit(0);
      },
      ::testing::ExitedWithCode(3), "attempt 5 of 5(.|\n)*fi_endpoint failed(.|\n)*Cannot assign requested address");
}

}  // namespace
}  // namespace thd::detail::libfabric
