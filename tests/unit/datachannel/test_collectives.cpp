// The collective algorithms over the in-process transport: every algorithm and
// every entry point, for group sizes 1..7 (odd ones included), empty, tiny,
// uneven and multi-chunk buffers, every dtype and reduce op, both ends as root,
// against references computed here; plus the failure cases (mismatched
// collectives, a lost rank, a rank that never comes).
#include <gtest/gtest.h>
#include <thd/datachannel.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/comm.h"
#include "datachannel/collectives/ring.h"
#include "datachannel/collectives/select.h"
#include "datachannel/envelope.h"
#include "datachannel/inproc_transport.h"
#include "datachannel/reduce_reference.h"
#include "datachannel/test_util.h"
#include "expect_throw.h"
#include "scoped_env.h"
#include "tensor/dispatch.h"

namespace thd {
namespace {

using namespace std::chrono_literals;
using detail::Comm;
using detail::MessageKind;
using detail::MessageOp;
using test::InprocTransport;
using test::InprocWorld;

using test::cat;

constexpr int kSizes[] = {1, 2, 3, 4, 5, 7};
// Empty, one element, fewer than most group sizes, uneven, and several 256 KiB
// chunks plus an odd tail (in float32 elements: 300 004 bytes).
constexpr size_t kCounts[] = {0, 1, 7, 1000, 75001};
constexpr ReduceOp kAllOps[] = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max,
                                ReduceOp::Avg, ReduceOp::BAnd, ReduceOp::BOr, ReduceOp::BXor};
constexpr DType kAllDTypes[] = {kBool, kUInt8, kInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};

bool applies(DType dtype, ReduceOp op) {
  if (op == ReduceOp::Avg) return is_floating_point(dtype);
  if (op == ReduceOp::BAnd || op == ReduceOp::BOr || op == ReduceOp::BXor) return !is_floating_point(dtype);
  return true;
}

// ---- a world of ranks as threads ------------------------------------------------------

// One InprocTransport per rank; run() runs a body on one thread per group
// member and collects what each threw. Every run() is one collective call, with
// its own sequence number in the envelope's tag.
class World {
 public:
  explicit World(int size, std::vector<int> group = {}) : inproc_(std::make_shared<InprocWorld>(size)) {
    for (int r = 0; r < size; ++r) transports_.push_back(std::make_unique<InprocTransport>(inproc_, r));
    if (group.empty()) {
      group.resize(static_cast<size_t>(size));
      std::iota(group.begin(), group.end(), 0);
    }
    group_ = std::move(group);
  }

  int size() const { return static_cast<int>(group_.size()); }
  InprocWorld& inproc() { return *inproc_; }
  const std::vector<int>& group() const { return group_; }

  // The Comm of group rank `rank` for one call of `kind`.
  Comm comm(int rank, const MessageKind& kind, std::chrono::milliseconds timeout = test::kLong) {
    detail::Envelope envelope;
    envelope.context = detail::collective_context(1);
    envelope.tag = call_;
    envelope.kind = kind;
    return Comm(*transports_[static_cast<size_t>(group_[static_cast<size_t>(rank)])], group_, rank, envelope,
                net::deadline_after(timeout), std::string(detail::message_op_name(kind.op)));
  }

  std::vector<std::exception_ptr> run(const std::function<void(int rank)>& body) {
    auto errors = test::run_rank_threads(size(), body);
    ++call_;
    return errors;
  }

  // run(), and every rank must succeed and leave nothing behind in the transport.
  void run_ok(const std::function<void(int rank)>& body, const std::string& what) {
    auto errors = run(body);
    for (size_t r = 0; r < errors.size(); ++r) {
      if (!errors[r]) continue;
      try {
        std::rethrow_exception(errors[r]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": rank " << r << " threw " << e.what();
      }
    }
    EXPECT_EQ(inproc_->pending(), 0u) << what << ": messages left over";
  }

 private:
  std::shared_ptr<InprocWorld> inproc_;
  std::vector<std::unique_ptr<InprocTransport>> transports_;
  std::vector<int> group_;
  int64_t call_ = 0;
};

MessageKind kind_of(MessageOp op, DType dtype, size_t count, ReduceOp rop = ReduceOp::Sum, int root = -1) {
  MessageKind k;
  k.op = op;
  k.dtype = static_cast<uint8_t>(dtype);
  k.reduce = static_cast<uint8_t>(rop);
  k.root = root;
  k.count = count;
  return k;
}

std::string what_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

using Bytes = std::vector<uint8_t>;

// ---- the test transport itself ---------------------------------------------------------

std::shared_ptr<detail::RequestState> new_state() {
  return std::make_shared<detail::RequestState>("test", net::deadline_after(test::kLong), nullptr, 0);
}

detail::Envelope p2p_envelope(int64_t tag, size_t nbytes) {
  detail::Envelope e;
  e.context = detail::p2p_context(0);
  e.tag = tag;
  e.kind.count = nbytes;
  return e;
}

TEST(InprocTransport, MatchesInOrderPerSourceAndTagAndAnySource) {
  auto world = std::make_shared<InprocWorld>(3);
  InprocTransport t0(world, 0), t1(world, 1), t2(world, 2);
  const Bytes a{1}, b{2}, c{3}, d{4};
  for (auto [data, tag] : {std::pair{&a, 5}, std::pair{&b, 7}, std::pair{&c, 5}}) {
    t0.post_send(*data, 1, p2p_envelope(tag, 1), new_state());
  }
  t2.post_send(d, 1, p2p_envelope(9, 1), new_state());
  auto recv = [&](int src, int64_t tag) {
    Bytes got(1);
    auto state = new_state();
    t1.post_recv(got, src, p2p_envelope(tag, 1), state);
    EXPECT_EQ(state->status(), detail::RequestState::Done);
    return std::pair{got[0], state->source};
  };
  EXPECT_EQ(recv(0, 5), std::pair(uint8_t{1}, 0));
  EXPECT_EQ(recv(0, 5), std::pair(uint8_t{3}, 0));  // the same tag in send order
  EXPECT_EQ(recv(kAnySource, 9), std::pair(uint8_t{4}, 2));
  EXPECT_EQ(recv(kAnySource, 7), std::pair(uint8_t{2}, 0));
  EXPECT_EQ(world->pending(), 0u);
}

TEST(InprocTransport, ChecksEveryMatchAndCancelsWhatIsPending) {
  auto world = std::make_shared<InprocWorld>(2);
  InprocTransport t0(world, 0), t1(world, 1);
  // A big message waits for its receive (rendezvous) and fails it when the size differs.
  Bytes big(InprocWorld::kEagerBytes + 1, 7), small(10);
  auto send = new_state(), recv = new_state();
  t0.post_send(big, 1, p2p_envelope(0, big.size()), send);
  EXPECT_FALSE(send->finished());
  t1.post_recv(small, 0, p2p_envelope(0, small.size()), recv);
  ASSERT_EQ(recv->status(), detail::RequestState::Failed);
  THD_EXPECT_THROW_MSG(std::rethrow_exception(recv->error), ValueError, "rank 0 sent send(");
  EXPECT_TRUE(send->finished());

  // An unmatched receive is withdrawn by cancel, with the error given.
  auto pending = new_state();
  t1.post_recv(small, 0, p2p_envelope(1, small.size()), pending);
  EXPECT_EQ(world->pending(), 1u);
  t1.cancel(pending, std::make_exception_ptr(TimeoutError("gave up")));
  EXPECT_EQ(pending->status(), detail::RequestState::Failed);
  EXPECT_EQ(world->pending(), 0u);

  // A lost rank fails what waits on it, and everything later.
  auto waiting = new_state();
  t1.post_recv(small, 0, p2p_envelope(2, small.size()), waiting);
  world->kill(0);
  EXPECT_EQ(waiting->status(), detail::RequestState::Failed);
  auto later = new_state();
  t1.post_send(small, 0, p2p_envelope(3, small.size()), later);
  THD_EXPECT_THROW_MSG(std::rethrow_exception(later->error), PeerLost, "rank 0 was lost");
  EXPECT_TRUE(t1.peer_error(0));
  EXPECT_FALSE(t1.peer_error(1));
}

// ---- inputs and references --------------------------------------------------------------

// Rank r's element i. Floating inputs are small integers (powers of two for
// Prod) so that every order of reduction gives exactly the same result and
// results can be compared bit for bit; integers span their whole range so sums
// and products wrap.
template <typename T>
T input_value(int rank, size_t i, ReduceOp op) {
  const uint64_t mix = (static_cast<uint64_t>(rank) + 1) * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xBF58476D1CE4E5B9ull;
  if constexpr (std::is_same_v<T, bool>) {
    return (mix >> 17) % 5 != 0;
  } else if constexpr (detail::is_float_v<T>) {
    if (op == ReduceOp::Prod) {
      constexpr float kFactors[] = {0.5f, 1.0f, 2.0f, -1.0f, -2.0f, 1.0f};
      return T(kFactors[(mix >> 13) % 6]);
    }
    return T(static_cast<float>(static_cast<int>((mix >> 13) % 9) - 4));
  } else {
    return static_cast<T>(mix >> 7);
  }
}


// Every rank's input of `count` elements.
std::vector<Bytes> make_inputs(int n, size_t count, DType dtype, ReduceOp op) {
  std::vector<Bytes> in(static_cast<size_t>(n), Bytes(count * element_size(dtype)));
  detail::dispatch_all(dtype, "test", [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int r = 0; r < n; ++r) {
      auto* p = reinterpret_cast<T*>(in[static_cast<size_t>(r)].data());
      for (size_t i = 0; i < count; ++i) p[i] = input_value<T>(r, i, op);
    }
  });
  return in;
}

// The op over every rank's input, element by element.
Bytes reference_reduce(const std::vector<Bytes>& in, size_t count, DType dtype, ReduceOp op) {
  Bytes out = in[0];
  detail::dispatch_all(dtype, "test", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto* acc = reinterpret_cast<T*>(out.data());
    for (size_t r = 1; r < in.size(); ++r) {
      const auto* p = reinterpret_cast<const T*>(in[r].data());
      for (size_t i = 0; i < count; ++i) acc[i] = test::reduce_reference(acc[i], p[i], op);
    }
    if constexpr (detail::is_float_v<T>) {
      if (op == ReduceOp::Avg) {
        using C = detail::compute_t<T>;
        for (size_t i = 0; i < count; ++i) acc[i] = T(static_cast<C>(acc[i]) / static_cast<C>(in.size()));
      }
    }
  });
  return out;
}

// Bit-for-bit equality of two buffers of elements; on failure, the first
// element that differs, as numbers.
::testing::AssertionResult same_bytes(const Bytes& got, const Bytes& want, DType dtype) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  }
  const size_t elem = element_size(dtype);
  for (size_t i = 0; i < got.size(); i += elem) {
    if (std::memcmp(&got[i], &want[i], elem) == 0) continue;
    double g = 0, w = 0;
    detail::dispatch_all(dtype, "test", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T a, b;
      std::memcpy(&a, &got[i], elem);
      std::memcpy(&b, &want[i], elem);
      g = detail::convert<double>(a);
      w = detail::convert<double>(b);
    });
    return ::testing::AssertionFailure() << "element " << i / elem << " of " << got.size() / elem << ": got " << g
                                         << ", want " << w;
  }
  return ::testing::AssertionSuccess();
}

// ---- the algorithms as values -------------------------------------------------------

// Small chunks make long pipelines out of small buffers: count 1000 float32 in
// 3 ranks is 5 chunks a block at 256 bytes.
constexpr size_t kTinyChunk = 256;
constexpr size_t kSmallChunk = 16 * 1024;

using AllReduceFn = std::function<void(Comm&, void*, size_t, DType, ReduceOp)>;
struct AllReduceAlgo {
  const char* name;
  AllReduceFn run;
};
const std::vector<AllReduceAlgo>& all_reduce_algos() {
  static const std::vector<AllReduceAlgo> algos{
      {"all_reduce", [](Comm& c, void* d, size_t n, DType t, ReduceOp o) { detail::all_reduce(c, d, n, t, o); }},
      {"ring", [](Comm& c, void* d, size_t n, DType t, ReduceOp o) { detail::ring_all_reduce(c, d, n, t, o); }},
      {"ring/tiny chunks",
       [](Comm& c, void* d, size_t n, DType t, ReduceOp o) {
         detail::ring_all_reduce(c, d, n, t, o, n * element_size(t) > 64 * 1024 ? kSmallChunk : kTinyChunk);
       }},
      {"recursive doubling",
       [](Comm& c, void* d, size_t n, DType t, ReduceOp o) { detail::recursive_doubling_all_reduce(c, d, n, t, o); }},
  };
  return algos;
}

void check_all_reduce(const AllReduceAlgo& algo, World& world, size_t count, DType dtype, ReduceOp op) {
  const int n = world.size();
  const std::string what =
      cat(algo.name, " of ", reduce_op_name(op), " x ", count, " ", dtype_name(dtype), " in ", n, " ranks");
  std::vector<Bytes> data = make_inputs(n, count, dtype, op);
  const Bytes want = reference_reduce(data, count, dtype, op);
  world.run_ok(
      [&](int r) {
        Comm comm = world.comm(r, kind_of(MessageOp::AllReduce, dtype, count, op));
        algo.run(comm, data[static_cast<size_t>(r)].data(), count, dtype, op);
      },
      what);
  for (int r = 0; r < n; ++r)
    EXPECT_TRUE(same_bytes(data[static_cast<size_t>(r)], want, dtype)) << what << ", rank " << r;
}

TEST(Collectives, AllReduceEverySizeAndCount) {
  for (const auto& algo : all_reduce_algos()) {
    for (int n : kSizes) {
      World world(n);
      for (size_t count : kCounts) check_all_reduce(algo, world, count, kFloat32, ReduceOp::Sum);
    }
  }
}

TEST(Collectives, AllReduceEveryDTypeAndOp) {
  for (const auto& algo : all_reduce_algos()) {
    for (int n : {3, 4}) {
      World world(n);
      for (DType dtype : kAllDTypes) {
        for (ReduceOp op : kAllOps) {
          if (applies(dtype, op)) check_all_reduce(algo, world, 37, dtype, op);
        }
      }
    }
  }
}

// Inputs that no order of summation gets exactly: every rank must still end
// with the same bits (a replica that drifts apart from the others is the bug
// this guards against), close to the exact sum.
TEST(Collectives, AllReduceGivesEveryRankTheSameBits) {
  for (const auto& algo : all_reduce_algos()) {
    for (int n : {3, 5, 6, 7}) {
      World world(n);
      for (DType dtype : {kFloat32, kFloat16, kBFloat16, kFloat64}) {
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
          const size_t count = 1001;
          std::vector<Bytes> data(static_cast<size_t>(n), Bytes(count * element_size(dtype)));
          std::vector<double> exact(count, 0.0);
          detail::dispatch<detail::kFloatingSet>(dtype, "test", [&](auto tag) {
            using T = typename decltype(tag)::type;
            for (int r = 0; r < n; ++r) {
              auto* p = reinterpret_cast<T*>(data[static_cast<size_t>(r)].data());
              for (size_t i = 0; i < count; ++i) {
                p[i] = T(static_cast<float>(std::sin(static_cast<double>(i * 7 + 1) * (r + 1)) * 3.3));
                exact[i] += static_cast<double>(static_cast<float>(p[i]));
              }
            }
          });
          const std::string what = cat(algo.name, " ", reduce_op_name(op), " ", dtype_name(dtype), " in ", n, " ranks");
          world.run_ok(
              [&](int r) {
                Comm comm = world.comm(r, kind_of(MessageOp::AllReduce, dtype, count, op));
                algo.run(comm, data[static_cast<size_t>(r)].data(), count, dtype, op);
              },
              what);
          for (int r = 1; r < n; ++r)
            EXPECT_EQ(data[static_cast<size_t>(r)], data[0]) << what << ": rank " << r << " differs from rank 0";
          const double tolerance = element_size(dtype) == 2 ? 0.05 : 1e-5;
          detail::dispatch<detail::kFloatingSet>(dtype, "test", [&](auto tag) {
            using T = typename decltype(tag)::type;
            const auto* p = reinterpret_cast<const T*>(data[0].data());
            for (size_t i = 0; i < count; ++i) {
              const double want = op == ReduceOp::Avg ? exact[i] / n : exact[i];
              ASSERT_NEAR(static_cast<double>(static_cast<float>(p[i])), want, tolerance * (std::abs(want) + n))
                  << what << " element " << i;
            }
          });
        }
      }
    }
  }
}

// A ring's chunks never overtake the receives a rank has posted ahead, even when
// one rank falls behind and the others run as far ahead as the ring lets them: a
// chunk that arrives before its receive costs a real transport a buffer and a
// copy (the tcp backend: a fresh allocation, its page faults and a memcpy).
TEST(Collectives, RingChunksFindTheirReceivesPostedWhenARankLags) {
  using std::chrono::microseconds;
  // kTinyChunk: small messages, which complete at once here as eager ones do.
  constexpr size_t kChunk = kTinyChunk;
  for (int n : {3, 4, 5}) {
    const size_t count = static_cast<size_t>(n) * 16 * kChunk / 4;  // 16 chunks per block
    for (int slow : {0, n - 1}) {
      World world(n);
      world.inproc().slow_down_sends(slow, 3, microseconds(500));
      // Past a rank's first round of receives, posted one by one as the call starts.
      world.inproc().count_overtaken_after(detail::ring_recv_depth(n, static_cast<size_t>(n - 1) * 16, kChunk));
      std::vector<Bytes> data = make_inputs(n, count, kFloat32, ReduceOp::Sum);
      const Bytes want = reference_reduce(data, count, kFloat32, ReduceOp::Sum);
      const std::string what = cat("ring all_reduce in ", n, " ranks, rank ", slow, " slow");
      world.run_ok(
          [&](int r) {
            Comm comm = world.comm(r, kind_of(MessageOp::AllReduce, kFloat32, count));
            detail::ring_all_reduce(comm, data[static_cast<size_t>(r)].data(), count, kFloat32, ReduceOp::Sum, kChunk);
          },
          what);
      for (int r = 0; r < n; ++r)
        EXPECT_TRUE(same_bytes(data[static_cast<size_t>(r)], want, kFloat32)) << what << ", rank " << r;
      EXPECT_EQ(world.inproc().overtaken(), 0u) << what;

      const size_t per_rank = count / static_cast<size_t>(n);
      std::vector<Bytes> in = make_inputs(n, count, kFloat32, ReduceOp::Sum);
      std::vector<Bytes> out(static_cast<size_t>(n), Bytes(per_rank * 4));
      world.run_ok(
          [&](int r) {
            Comm comm = world.comm(r, kind_of(MessageOp::ReduceScatter, kFloat32, per_rank));
            detail::ring_reduce_scatter(comm, in[static_cast<size_t>(r)].data(), out[static_cast<size_t>(r)].data(),
                                        per_rank, kFloat32, ReduceOp::Sum, kChunk);
          },
          what);
      EXPECT_EQ(world.inproc().overtaken(), 0u) << "ring reduce_scatter in " << n << " ranks, rank " << slow << " slow";
    }
  }
}

// Min and max of +0 / -0 and of NaNs with different payloads: the one place
// where IEEE results depend on operand order. Every rank must still agree.
TEST(Collectives, AllReduceMinMaxAgreeOnSignedZerosAndNaNPayloads) {
  for (const auto& algo : all_reduce_algos()) {
    for (int n : {2, 3, 5, 7}) {
      World world(n);
      for (ReduceOp op : {ReduceOp::Min, ReduceOp::Max}) {
        const size_t count = 64;
        std::vector<std::vector<float>> data(static_cast<size_t>(n), std::vector<float>(count));
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) {
            const uint32_t nan_bits = 0x7fc00000u | static_cast<uint32_t>(r * 64 + i + 1);
            const bool zero = (i + static_cast<size_t>(r)) % 3 != 0;
            data[static_cast<size_t>(r)][i] = i % 4 == 3 ? std::bit_cast<float>(nan_bits)
                                              : zero     ? ((r + i) % 2 == 0 ? 0.0f : -0.0f)
                                                         : 0.0f;
          }
        }
        const std::string what = cat(algo.name, " ", reduce_op_name(op), " in ", n, " ranks");
        world.run_ok(
            [&](int r) {
              Comm comm = world.comm(r, kind_of(MessageOp::AllReduce, kFloat32, count, op));
              algo.run(comm, data[static_cast<size_t>(r)].data(), count, kFloat32, op);
            },
            what);
        for (int r = 1; r < n; ++r) {
          EXPECT_EQ(0, std::memcmp(data[static_cast<size_t>(r)].data(), data[0].data(), count * sizeof(float)))
              << what << ": rank " << r << " differs from rank 0";
        }
        for (size_t i = 3; i < count; i += 4) EXPECT_TRUE(std::isnan(data[0][i])) << what << " element " << i;
      }
    }
  }
}

// ---- broadcast ----------------------------------------------------------------------

using BroadcastFn = std::function<void(Comm&, void*, size_t, int)>;
struct BroadcastAlgo {
  const char* name;
  BroadcastFn run;
};

TEST(Collectives, BroadcastEverySizeCountAndRoot) {
  const std::vector<BroadcastAlgo> algos{
      {"broadcast", [](Comm& c, void* d, size_t n, int root) { detail::broadcast(c, d, n, root); }},
      {"binomial tree", [](Comm& c, void* d, size_t n, int root) { detail::binomial_tree_broadcast(c, d, n, root); }},
      {"pipelined ring", [](Comm& c, void* d, size_t n, int root) { detail::pipelined_ring_broadcast(c, d, n, root); }},
      {"pipelined ring/small chunks",
       [](Comm& c, void* d, size_t n, int root) {
         detail::pipelined_ring_broadcast(c, d, n, root, n > 64 * 1024 ? kSmallChunk : kTinyChunk);
       }},
  };
  for (const auto& algo : algos) {
    for (int n : kSizes) {
      World world(n);
      for (size_t count : kCounts) {
        for (int root : {0, n - 1}) {
          const size_t nbytes = count * 4 + (count > 1 ? 3 : 0);  // odd byte counts too
          std::vector<Bytes> data = make_inputs(n, nbytes, kUInt8, ReduceOp::Sum);
          const Bytes want = data[static_cast<size_t>(root)];
          const std::string what = cat(algo.name, " of ", nbytes, " bytes from root ", root, " in ", n, " ranks");
          world.run_ok(
              [&](int r) {
                Comm comm = world.comm(r, kind_of(MessageOp::Broadcast, kUInt8, nbytes, ReduceOp::Sum, root));
                algo.run(comm, data[static_cast<size_t>(r)].data(), nbytes, root);
              },
              what);
          for (int r = 0; r < n; ++r)
            EXPECT_TRUE(same_bytes(data[static_cast<size_t>(r)], want, kUInt8)) << what << ", rank " << r;
        }
      }
    }
  }
}

// ---- reduce -------------------------------------------------------------------------

using ReduceFn = std::function<void(Comm&, void*, size_t, DType, ReduceOp, int)>;
struct ReduceAlgo {
  const char* name;
  ReduceFn run;
};
const std::vector<ReduceAlgo>& reduce_algos() {
  static const std::vector<ReduceAlgo> algos{
      {"reduce",
       [](Comm& c, void* d, size_t n, DType t, ReduceOp o, int root) { detail::reduce(c, d, n, t, o, root); }},
      {"binomial tree", [](Comm& c, void* d, size_t n, DType t, ReduceOp o,
                           int root) { detail::binomial_tree_reduce(c, d, n, t, o, root); }},
      {"ring",
       [](Comm& c, void* d, size_t n, DType t, ReduceOp o, int root) { detail::ring_reduce(c, d, n, t, o, root); }},
      {"ring/tiny chunks",
       [](Comm& c, void* d, size_t n, DType t, ReduceOp o, int root) {
         detail::ring_reduce(c, d, n, t, o, root, n * element_size(t) > 64 * 1024 ? kSmallChunk : kTinyChunk);
       }},
  };
  return algos;
}

void check_reduce(const ReduceAlgo& algo, World& world, size_t count, DType dtype, ReduceOp op, int root) {
  const int n = world.size();
  const std::string what = cat(algo.name, " of ", reduce_op_name(op), " x ", count, " ", dtype_name(dtype), " to root ",
                               root, " in ", n, " ranks");
  const std::vector<Bytes> inputs = make_inputs(n, count, dtype, op);
  std::vector<Bytes> data = inputs;
  world.run_ok(
      [&](int r) {
        Comm comm = world.comm(r, kind_of(MessageOp::Reduce, dtype, count, op, root));
        algo.run(comm, data[static_cast<size_t>(r)].data(), count, dtype, op, root);
      },
      what);
  EXPECT_TRUE(same_bytes(data[static_cast<size_t>(root)], reference_reduce(inputs, count, dtype, op), dtype)) << what;
  for (int r = 0; r < n; ++r) {
    if (r != root) {
      EXPECT_EQ(data[static_cast<size_t>(r)], inputs[static_cast<size_t>(r)])
          << what << ": rank " << r << "'s buffer changed";
    }
  }
}

TEST(Collectives, ReduceEverySizeCountAndRoot) {
  for (const auto& algo : reduce_algos()) {
    for (int n : kSizes) {
      World world(n);
      for (size_t count : kCounts) {
        for (int root : {0, n - 1}) check_reduce(algo, world, count, kFloat32, ReduceOp::Sum, root);
      }
    }
  }
}

TEST(Collectives, ReduceEveryDTypeAndOp) {
  for (const auto& algo : reduce_algos()) {
    World world(5);
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : kAllOps) {
        if (applies(dtype, op)) check_reduce(algo, world, 23, dtype, op, 3);
      }
    }
  }
}

// ---- all_gather, reduce_scatter -----------------------------------------------------------

TEST(Collectives, AllGatherEverySizeAndCount) {
  using Fn = std::function<void(Comm&, const void*, void*, size_t)>;
  const std::vector<std::pair<const char*, Fn>> algos{
      {"all_gather", [](Comm& c, const void* i, void* o, size_t b) { detail::all_gather(c, i, o, b); }},
      {"ring", [](Comm& c, const void* i, void* o, size_t b) { detail::ring_all_gather(c, i, o, b); }},
      {"ring/tiny chunks",
       [](Comm& c, const void* i, void* o, size_t b) {
         detail::ring_all_gather(c, i, o, b, b > 64 * 1024 ? kSmallChunk : kTinyChunk);
       }},
  };
  for (const auto& [name, run] : algos) {
    for (int n : kSizes) {
      World world(n);
      for (size_t count : kCounts) {
        const size_t nbytes = count * 4 + (count > 1 ? 1 : 0);
        const std::vector<Bytes> in = make_inputs(n, nbytes, kUInt8, ReduceOp::Sum);
        Bytes want;
        for (const Bytes& b : in) want.insert(want.end(), b.begin(), b.end());
        std::vector<Bytes> out(static_cast<size_t>(n), Bytes(want.size(), 0xee));
        const std::string what = cat(name, " of ", nbytes, " bytes a rank in ", n, " ranks");
        world.run_ok(
            [&](int r) {
              Comm comm = world.comm(r, kind_of(MessageOp::AllGather, kUInt8, nbytes));
              run(comm, in[static_cast<size_t>(r)].data(), out[static_cast<size_t>(r)].data(), nbytes);
            },
            what);
        for (int r = 0; r < n; ++r)
          EXPECT_TRUE(same_bytes(out[static_cast<size_t>(r)], want, kUInt8)) << what << ", rank " << r;
      }
    }
  }
}

using ReduceScatterFn = std::function<void(Comm&, const void*, void*, size_t, DType, ReduceOp)>;
void check_reduce_scatter(const char* name, const ReduceScatterFn& run, World& world, size_t count, DType dtype,
                          ReduceOp op) {
  const int n = world.size();
  const size_t elem = element_size(dtype);
  const std::string what =
      cat(name, " of ", reduce_op_name(op), " x ", count, " ", dtype_name(dtype), " a rank in ", n, " ranks");
  const std::vector<Bytes> in = make_inputs(n, count * static_cast<size_t>(n), dtype, op);
  const Bytes all = reference_reduce(in, count * static_cast<size_t>(n), dtype, op);
  std::vector<Bytes> out(static_cast<size_t>(n), Bytes(count * elem, 0xee));
  world.run_ok(
      [&](int r) {
        Comm comm = world.comm(r, kind_of(MessageOp::ReduceScatter, dtype, count, op));
        run(comm, in[static_cast<size_t>(r)].data(), out[static_cast<size_t>(r)].data(), count, dtype, op);
      },
      what);
  for (int r = 0; r < n; ++r) {
    const Bytes want(all.begin() + static_cast<ptrdiff_t>(r * count * elem),
                     all.begin() + static_cast<ptrdiff_t>((r + 1) * count * elem));
    EXPECT_TRUE(same_bytes(out[static_cast<size_t>(r)], want, dtype)) << what << ", rank " << r;
  }
}

const std::vector<std::pair<const char*, ReduceScatterFn>>& reduce_scatter_algos() {
  static const std::vector<std::pair<const char*, ReduceScatterFn>> algos{
      {"reduce_scatter", [](Comm& c, const void* i, void* o, size_t n, DType t,
                            ReduceOp op) { detail::reduce_scatter(c, i, o, n, t, op); }},
      {"ring", [](Comm& c, const void* i, void* o, size_t n, DType t,
                  ReduceOp op) { detail::ring_reduce_scatter(c, i, o, n, t, op); }},
      {"ring/tiny chunks",
       [](Comm& c, const void* i, void* o, size_t n, DType t, ReduceOp op) {
         detail::ring_reduce_scatter(c, i, o, n, t, op, n * element_size(t) > 64 * 1024 ? kSmallChunk : kTinyChunk);
       }},
  };
  return algos;
}

TEST(Collectives, ReduceScatterEverySizeAndCount) {
  for (const auto& [name, run] : reduce_scatter_algos()) {
    for (int n : kSizes) {
      World world(n);
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{30001}}) {
        check_reduce_scatter(name, run, world, count, kFloat32, ReduceOp::Sum);
      }
    }
  }
}

TEST(Collectives, ReduceScatterEveryDTypeAndOp) {
  for (const auto& [name, run] : reduce_scatter_algos()) {
    World world(3);
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : kAllOps) {
        if (applies(dtype, op)) check_reduce_scatter(name, run, world, 19, dtype, op);
      }
    }
  }
}

// ---- float16 / bfloat16 accumulation ---------------------------------------------------

// Four ranks' 15464, 5632, -13960, -7592: summed in float32 and rounded once they
// are -456 in float16 and -416 in bfloat16 (whose inputs round to 15488, 5632,
// -13952, -7584); every algorithm, called directly, must give exactly that
// (16-bit partial sums give -464 or -384, depending on the order).
constexpr float kHalfInputs[] = {15464, 5632, -13960, -7592};

Bytes filled_16bit(DType dtype, size_t count, float value) {
  Bytes b(count * element_size(dtype));
  detail::dispatch<detail::kFloatingSet>(dtype, "test", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto* p = reinterpret_cast<T*>(b.data());
    for (size_t i = 0; i < count; ++i) p[i] = T(value);
  });
  return b;
}

TEST(Collectives, SixteenBitSumsAccumulateInFloat32InEveryAlgorithm) {
  World world(4);
  for (DType dtype : {kFloat16, kBFloat16}) {
    const float sum = dtype == kFloat16 ? -456 : -416;
    // 7 elements: ring blocks of 2, 2, 2 and 1, each reduced in another order.
    const size_t count = 7;
    for (const auto& algo : all_reduce_algos()) {
      std::vector<Bytes> data;
      for (float v : kHalfInputs) data.push_back(filled_16bit(dtype, count, v));
      const std::string what = cat(algo.name, " sum of ", dtype_name(dtype));
      world.run_ok(
          [&](int r) {
            Comm comm = world.comm(r, kind_of(MessageOp::AllReduce, dtype, count, ReduceOp::Sum));
            algo.run(comm, data[static_cast<size_t>(r)].data(), count, dtype, ReduceOp::Sum);
          },
          what);
      for (int r = 0; r < 4; ++r) {
        EXPECT_TRUE(same_bytes(data[static_cast<size_t>(r)], filled_16bit(dtype, count, sum), dtype))
            << what << ", rank " << r;
      }
    }
    for (const auto& algo : reduce_algos()) {
      std::vector<Bytes> data;
      for (float v : kHalfInputs) data.push_back(filled_16bit(dtype, count, v));
      const std::vector<Bytes> inputs = data;
      const std::string what = cat(algo.name, " reduce sum of ", dtype_name(dtype));
      world.run_ok(
          [&](int r) {
            Comm comm = world.comm(r, kind_of(MessageOp::Reduce, dtype, count, ReduceOp::Sum, 2));
            algo.run(comm, data[static_cast<size_t>(r)].data(), count, dtype, ReduceOp::Sum, 2);
          },
          what);
      EXPECT_TRUE(same_bytes(data[2], filled_16bit(dtype, count, sum), dtype)) << what;
      for (int r : {0, 1, 3}) EXPECT_EQ(data[static_cast<size_t>(r)], inputs[static_cast<size_t>(r)]) << what;
    }
    for (const auto& [name, run] : reduce_scatter_algos()) {
      std::vector<Bytes> in;
      for (float v : kHalfInputs) in.push_back(filled_16bit(dtype, 4 * count, v));
      std::vector<Bytes> out(4, Bytes(count * element_size(dtype)));
      const std::string what = cat(name, " reduce_scatter sum of ", dtype_name(dtype));
      world.run_ok(
          [&](int r) {
            Comm comm = world.comm(r, kind_of(MessageOp::ReduceScatter, dtype, count, ReduceOp::Sum));
            run(comm, in[static_cast<size_t>(r)].data(), out[static_cast<size_t>(r)].data(), count, dtype,
                ReduceOp::Sum);
          },
          what);
      for (int r = 0; r < 4; ++r) {
        EXPECT_TRUE(same_bytes(out[static_cast<size_t>(r)], filled_16bit(dtype, count, sum), dtype))
            << what << ", rank " << r;
      }
    }
  }
}

// ---- gather, scatter, all_to_all, barrier -------------------------------------------------

TEST(Collectives, GatherAndScatterEverySizeCountAndRoot) {
  for (int n : kSizes) {
    World world(n);
    for (size_t count : kCounts) {
      for (int root : {0, n - 1}) {
        const size_t nbytes = count * 4 + (count > 1 ? 3 : 0);
        const std::vector<Bytes> in = make_inputs(n, nbytes, kUInt8, ReduceOp::Sum);
        Bytes all;
        for (const Bytes& b : in) all.insert(all.end(), b.begin(), b.end());

        for (bool entry : {true, false}) {
          const std::string what =
              cat(entry ? "gather" : "linear_gather", " of ", nbytes, " bytes a rank, root ", root, " of ", n);
          Bytes out(all.size(), 0xee);
          world.run_ok(
              [&](int r) {
                Comm comm = world.comm(r, kind_of(MessageOp::Gather, kUInt8, nbytes, ReduceOp::Sum, root));
                void* to = r == root ? out.data() : nullptr;
                if (entry) {
                  detail::gather(comm, in[static_cast<size_t>(r)].data(), to, nbytes, root);
                } else {
                  detail::linear_gather(comm, in[static_cast<size_t>(r)].data(), to, nbytes, root);
                }
              },
              what);
          EXPECT_TRUE(same_bytes(out, all, kUInt8)) << what;
        }
        for (bool entry : {true, false}) {
          const std::string what =
              cat(entry ? "scatter" : "linear_scatter", " of ", nbytes, " bytes a rank, root ", root, " of ", n);
          std::vector<Bytes> out(static_cast<size_t>(n), Bytes(nbytes, 0xee));
          world.run_ok(
              [&](int r) {
                Comm comm = world.comm(r, kind_of(MessageOp::Scatter, kUInt8, nbytes, ReduceOp::Sum, root));
                const void* from = r == root ? all.data() : nullptr;
                if (entry) {
                  detail::scatter(comm, from, out[static_cast<size_t>(r)].data(), nbytes, root);
                } else {
                  detail::linear_scatter(comm, from, out[static_cast<size_t>(r)].data(), nbytes, root);
                }
              },
              what);
          for (int r = 0; r < n; ++r) {
            EXPECT_TRUE(same_bytes(out[static_cast<size_t>(r)], in[static_cast<size_t>(r)], kUInt8))
                << what << ", rank " << r;
          }
        }
      }
    }
  }
}

TEST(Collectives, AllToAllEverySizeAndCount) {
  for (bool entry : {true, false}) {
    for (int n : kSizes) {
      World world(n);
      for (size_t count : kCounts) {
        const size_t nbytes = count + (count > 1 ? 1 : 0);
        const std::vector<Bytes> in = make_inputs(n, nbytes * static_cast<size_t>(n), kUInt8, ReduceOp::Sum);
        std::vector<Bytes> out(static_cast<size_t>(n), Bytes(nbytes * static_cast<size_t>(n), 0xee));
        const std::string what =
            cat(entry ? "all_to_all" : "pairwise", " of ", nbytes, " bytes a block in ", n, " ranks");
        world.run_ok(
            [&](int r) {
              Comm comm = world.comm(r, kind_of(MessageOp::AllToAll, kUInt8, nbytes * static_cast<size_t>(n)));
              auto* o = out[static_cast<size_t>(r)].data();
              if (entry) {
                detail::all_to_all(comm, in[static_cast<size_t>(r)].data(), o, nbytes);
              } else {
                detail::pairwise_all_to_all(comm, in[static_cast<size_t>(r)].data(), o, nbytes);
              }
            },
            what);
        // Block j of rank i's input is block i of rank j's output.
        for (size_t i = 0; i < static_cast<size_t>(n) && nbytes > 0; ++i) {
          for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
            EXPECT_EQ(0, std::memcmp(in[i].data() + j * nbytes, out[j].data() + i * nbytes, nbytes))
                << what << ": block " << j << " of rank " << i;
          }
        }
      }
    }
  }
}

TEST(Collectives, BarrierLetsNoRankThroughBeforeAllArrive) {
  for (bool entry : {true, false}) {
    for (int n : kSizes) {
      World world(n);
      for (int round = 0; round < 3; ++round) {
        std::atomic<int> arrived{0};
        std::atomic<int> early{0};
        world.run_ok(
            [&](int r) {
              // Late ranks arrive late, so an early exit would be seen.
              std::this_thread::sleep_for(std::chrono::microseconds(300 * ((r + round) % n)));
              arrived.fetch_add(1);
              Comm comm = world.comm(r, kind_of(MessageOp::Barrier, kUInt8, 0));
              if (entry) {
                detail::barrier(comm);
              } else {
                detail::dissemination_barrier(comm);
              }
              if (arrived.load() != n) early.fetch_add(1);
            },
            cat("barrier of ", n));
        EXPECT_EQ(early.load(), 0) << n << " ranks";
      }
    }
  }
}

// ---- groups, selection, argument checks ----------------------------------------------------

TEST(Collectives, SubgroupsTranslateGroupRanksToWorldRanks) {
  // Group ranks 0..3 are world ranks 5, 2, 0, 3 of a world of 6.
  World world(6, {5, 2, 0, 3});
  for (const auto& algo : all_reduce_algos()) check_all_reduce(algo, world, 1000, kInt32, ReduceOp::Sum);
  check_reduce(reduce_algos()[1], world, 100, kFloat64, ReduceOp::Max, 1);
  check_reduce_scatter("ring", reduce_scatter_algos()[1].second, world, 50, kInt64, ReduceOp::Sum);
}

TEST(Collectives, ConsecutiveCollectivesOnOneWorldStayApart) {
  World world(3);
  for (int i = 0; i < 20; ++i) check_all_reduce(all_reduce_algos()[i % 4], world, 100 + i, kFloat32, ReduceOp::Max);
}

TEST(Collectives, SelectionFollowsSizeAndGroup) {
  using detail::AllReduceAlgorithm;
  using detail::BroadcastAlgorithm;
  using detail::ReduceAlgorithm;
  if (std::getenv("THD_ALLREDUCE_ALGO") == nullptr) {
    EXPECT_EQ(detail::choose_all_reduce(1024, 256, 8), AllReduceAlgorithm::RecursiveDoubling);
    EXPECT_EQ(detail::choose_all_reduce(detail::kAllReduceRecursiveDoublingMaxBytes + 4, 1 << 14, 8),
              AllReduceAlgorithm::Ring);
    EXPECT_EQ(detail::choose_all_reduce(64 << 20, 3, 4), AllReduceAlgorithm::RecursiveDoubling);  // 3 huge elements
  }
  if (std::getenv("THD_BROADCAST_ALGO") == nullptr) {
    EXPECT_EQ(detail::choose_broadcast(100, 8), BroadcastAlgorithm::BinomialTree);
    EXPECT_EQ(detail::choose_broadcast(16 << 20, 8), BroadcastAlgorithm::PipelinedRing);
    EXPECT_EQ(detail::choose_broadcast(16 << 20, 2), BroadcastAlgorithm::BinomialTree);
  }
  EXPECT_EQ(detail::choose_reduce(100, 8), ReduceAlgorithm::BinomialTree);
  EXPECT_EQ(detail::choose_reduce(16 << 20, 8), ReduceAlgorithm::Ring);
  EXPECT_EQ(detail::choose_reduce(16 << 20, 2), ReduceAlgorithm::BinomialTree);
}

TEST(Collectives, CrossoversMoveWithTheirVariables) {
  using detail::AllReduceAlgorithm;
  using detail::BroadcastAlgorithm;
  using detail::ReduceAlgorithm;
  if (std::getenv("THD_ALLREDUCE_ALGO") != nullptr || std::getenv("THD_BROADCAST_ALGO") != nullptr) {
    GTEST_SKIP() << "an algorithm is forced";
  }
  {
    test::ScopedEnv rd("THD_ALLREDUCE_RD_MAX_BYTES", "1048576");
    EXPECT_EQ(detail::choose_all_reduce(512 << 10, 1 << 17, 8), AllReduceAlgorithm::RecursiveDoubling);
    EXPECT_EQ(detail::choose_all_reduce(2 << 20, 1 << 19, 8), AllReduceAlgorithm::Ring);
  }
  EXPECT_EQ(detail::choose_all_reduce(512 << 10, 1 << 17, 8), AllReduceAlgorithm::Ring);
  {
    test::ScopedEnv tree("THD_BROADCAST_TREE_MAX_BYTES", "0");
    EXPECT_EQ(detail::choose_broadcast(100, 8), BroadcastAlgorithm::PipelinedRing);
  }
  {
    test::ScopedEnv ring("THD_REDUCE_RING_MIN_BYTES", "4096");
    EXPECT_EQ(detail::choose_reduce(8192, 8), ReduceAlgorithm::Ring);
  }
  for (const char* bad : {"lots", "-1", "64K"}) {
    SCOPED_TRACE(bad);
    test::ScopedEnv rd("THD_ALLREDUCE_RD_MAX_BYTES", bad);
    THD_EXPECT_THROW_MSG((void)detail::choose_all_reduce(1024, 256, 8), ValueError, "THD_ALLREDUCE_RD_MAX_BYTES");
  }
}

TEST(Collectives, EntryPointsRejectBadArgumentsOnEveryRank) {
  World world(2);
  auto errors = world.run([&](int r) {
    Comm comm = world.comm(r, kind_of(MessageOp::Broadcast, kUInt8, 4, ReduceOp::Sum, 2));
    uint32_t x = 0;
    detail::broadcast(comm, &x, 4, 2);
  });
  for (auto& e : errors) {
    ASSERT_TRUE(e);
    THD_EXPECT_THROW_MSG(std::rethrow_exception(e), ValueError, "root 2 is not a rank of this group of 2");
  }
  errors = world.run([&](int r) {
    Comm comm = world.comm(r, kind_of(MessageOp::AllReduce, kInt32, 1, ReduceOp::Avg));
    int32_t x = 0;
    detail::all_reduce(comm, &x, 1, kInt32, ReduceOp::Avg);
  });
  for (auto& e : errors) {
    ASSERT_TRUE(e);
    THD_EXPECT_THROW_MSG(std::rethrow_exception(e), TypeError, "avg does not apply to int32");
  }
  errors = world.run([&](int r) {
    Comm comm = world.comm(r, kind_of(MessageOp::AllReduce, kFloat32, 8));
    detail::all_reduce(comm, nullptr, 8, kFloat32, ReduceOp::Sum);
  });
  for (auto& e : errors) {
    ASSERT_TRUE(e);
    THD_EXPECT_THROW_MSG(std::rethrow_exception(e), ValueError, "null");
  }
  EXPECT_EQ(world.inproc().pending(), 0u);
}

// ---- failures -------------------------------------------------------------------------------

// A rank that runs a different collective (or the same with another size)
// makes the call fail on every rank, well before the deadline, with an error
// naming the mismatch: a rank that sees the other's message names both calls and
// tells the rest (mismatch notices) — never a hang or a corrupted buffer; and
// nothing but notices that came after their receiver had failed is left in the
// transport.
void check_mismatch(const MessageKind& odd, const std::function<void(Comm&, std::vector<float>&)>& odd_call,
                    const std::string& odd_text) {
  for (int n : {2, 3, 4}) {
    World world(n);
    const size_t count = 100000;  // ring all_reduce, several messages each way
    const MessageKind usual = kind_of(MessageOp::AllReduce, kFloat32, count);
    std::vector<std::vector<float>> data(static_cast<size_t>(n), std::vector<float>(count + 8, 1.0f));
    const auto start = std::chrono::steady_clock::now();
    auto errors = world.run([&](int r) {
      const bool is_odd = r == n - 1;
      Comm comm = world.comm(r, is_odd ? odd : usual, test::kLong);
      if (is_odd) {
        odd_call(comm, data[static_cast<size_t>(r)]);
      } else {
        detail::ring_all_reduce(comm, data[static_cast<size_t>(r)].data(), count, kFloat32, ReduceOp::Sum);
      }
    });
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << n << " ranks, with a deadline of 10 s";
    int named_both = 0;
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(errors[static_cast<size_t>(r)]) << "rank " << r << " of " << n << " finished a mismatched collective";
      const std::string what = what_of(errors[static_cast<size_t>(r)]);
      try {
        std::rethrow_exception(errors[static_cast<size_t>(r)]);
      } catch (const ValueError&) {
        EXPECT_NE(what.find("collectives do not match"), std::string::npos) << what;
        if (what.find("all_reduce(float32, 100000 elements, sum)") != std::string::npos &&
            what.find(odd_text) != std::string::npos) {
          ++named_both;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": unexpected error " << e.what();
      }
    }
    EXPECT_EQ(named_both, n) << n << " ranks: every rank names both calls";
    const size_t notices = world.inproc().unreceived_notices();
    EXPECT_LE(notices, static_cast<size_t>(n * (n - 1))) << "more than one notice per pair of ranks";
    EXPECT_EQ(world.inproc().pending() - notices, 0u) << "messages of the failed call left in the transport";
  }
}

TEST(Collectives, MismatchedCountFailsNamingBothCalls) {
  check_mismatch(
      kind_of(MessageOp::AllReduce, kFloat32, 100008),
      [](Comm& c, std::vector<float>& d) { detail::ring_all_reduce(c, d.data(), 100008, kFloat32, ReduceOp::Sum); },
      "all_reduce(float32, 100008 elements, sum)");
}

TEST(Collectives, MismatchedCollectiveFailsNamingBothCalls) {
  check_mismatch(
      kind_of(MessageOp::Broadcast, kFloat32, 100000, ReduceOp::Sum, 0),
      [](Comm& c, std::vector<float>& d) { detail::pipelined_ring_broadcast(c, d.data(), 400000, 0); },
      "broadcast(float32, 100000 elements, root 0)");
}

TEST(Collectives, ALostRankFailsEveryMemberWithPeerLost) {
  for (const auto& algo : all_reduce_algos()) {
    const int n = 4;
    World world(n);
    std::vector<std::vector<float>> data(n, std::vector<float>(50000, 1.0f));
    const auto start = std::chrono::steady_clock::now();
    auto errors = world.run([&](int r) {
      if (r == 2) {  // dies instead of joining, after the others have started waiting
        std::this_thread::sleep_for(30ms);
        world.inproc().kill(2);
        return;
      }
      Comm comm = world.comm(r, kind_of(MessageOp::AllReduce, kFloat32, 50000), test::kLong);
      algo.run(comm, data[static_cast<size_t>(r)].data(), 50000, kFloat32, ReduceOp::Sum);
    });
    // Noticed within the liveness slice, not at the 10 s deadline.
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << algo.name;
    for (int r : {0, 1, 3}) {
      ASSERT_TRUE(errors[static_cast<size_t>(r)]) << algo.name << ": rank " << r;
      try {
        std::rethrow_exception(errors[static_cast<size_t>(r)]);
      } catch (const PeerLost& e) {
        EXPECT_EQ(e.context().peer, 2) << algo.name << ": " << e.what();
        EXPECT_NE(std::string(e.what()).find("rank 2"), std::string::npos) << e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << algo.name << ": rank " << r << " threw " << e.what() << " instead of PeerLost";
      }
    }
  }
}

TEST(Collectives, ARankThatNeverComesTimesOutNamingIt) {
  World world(3);
  std::vector<std::vector<float>> data(3, std::vector<float>(10, 1.0f));
  const auto start = std::chrono::steady_clock::now();
  auto errors = world.run([&](int r) {
    if (r == 1) return;  // never calls
    Comm comm = world.comm(r, kind_of(MessageOp::AllReduce, kFloat32, 10), test::kShort);
    detail::recursive_doubling_all_reduce(comm, data[static_cast<size_t>(r)].data(), 10, kFloat32, ReduceOp::Sum);
  });
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, test::kShort);
  EXPECT_LT(took, test::kShort + 2s);
  EXPECT_FALSE(errors[1]);
  for (int r : {0, 2}) {
    ASSERT_TRUE(errors[static_cast<size_t>(r)]);
    // rd with 3 ranks: rank 0 folds into rank 1 (and waits for its answer), rank 2
    // pairs with rank 1.
    THD_EXPECT_THROW_MSG(std::rethrow_exception(errors[static_cast<size_t>(r)]), TimeoutError,
                         "all_reduce: recv from rank 1 did not finish before the collective's deadline");
  }
  // The sends of ranks 0 and 2 were eager (they wait in rank 1's mailbox, as they
  // would in a real transport's buffers); both receives were withdrawn.
  EXPECT_EQ(world.inproc().pending(), 2u);
}

// ---- throughput -----------------------------------------------------------------------------

// Not a test: ./thd_datachannel_tests --gtest_also_run_disabled_tests
//   --gtest_filter='*RingAllReduceThroughput*' prints the bus bandwidth of ring
// all_reduce over the in-process transport (memcpy and the reduction kernel).
TEST(Collectives, DISABLED_RingAllReduceThroughput) {
  const int n = 4;
  const size_t count = (64u << 20) / 4;
  World world(n);
  std::vector<std::vector<float>> data(n, std::vector<float>(count, 1.0f));
  for (size_t chunk :
       {size_t{64} << 10, size_t{256} << 10, detail::kRingChunkBytes, size_t{2} << 20, size_t{16} << 20}) {
    double best = 1e9;
    for (int iter = 0; iter < 5; ++iter) {
      const auto start = std::chrono::steady_clock::now();
      world.run_ok(
          [&](int r) {
            Comm comm = world.comm(r, kind_of(MessageOp::AllReduce, kFloat32, count));
            detail::ring_all_reduce(comm, data[static_cast<size_t>(r)].data(), count, kFloat32, ReduceOp::Sum, chunk);
          },
          "throughput");
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    const double algbw = static_cast<double>(count * 4) / best / 1e9;
    std::printf(
        "ring all_reduce 64 MiB float32, %d threads, %zu KiB chunks: best %.1f ms, algbw %.2f GB/s, busbw %.2f GB/s\n",
        n, chunk >> 10, best * 1e3, algbw, algbw * 2.0 * (n - 1) / n);
  }
}

}  // namespace
}  // namespace thd
