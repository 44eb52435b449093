#include "bench/dispatch/figures.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <iostream>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <stdexcept>
#include <vector>

#include <thd/cuda.h>
#include <thd/distributed.h>
#include <thd/graph.h>
#include <thd/stream.h>
#include <thd/tensor.h>

#include "bench/datachannel/dist_timer.h"
#include "bench/datachannel/raw_tcp.h"
#include "bench/datachannel/sizes.h"
#include "datachannel/small_header.h"

namespace thd::bench::mw {
namespace {

constexpr double kGiga = 1e9;
constexpr int64_t kTinyElements = 16;

// The targets of the master-worker path (issues 4 and 36).
constexpr double kDispatchTarget = 2.5e6;  // ops/s, at least
constexpr double kRttTarget = 3.0;         // x the plain socket's round trip, at most
constexpr double kCopyTarget = 0.95;       // x the plain socket's bandwidth, at least
constexpr double kOneOpBatchTarget = 160;  // bytes on the wire, transport header included, at most
// Issue 38's targets for graph replays of tiny ops.
constexpr double kGraphVsLocalTarget = 0.7;  // x ref.local.ops, at least
constexpr double kGraphVsEagerTarget = 3.0;  // x mw.dispatch.async, at least
constexpr int64_t kGraphOps = 1000;          // ops in the graph of mw.graph.replay.ops
constexpr double kGraphStepTarget = 0.5;     // x the eager step's time, at most

struct Sizes {
  explicit Sizes(const Options& opt)
      : Sizes(opt.quick, suite_integer_arg(opt, kOpsFlag, opt.quick ? 1000 : 1000 * 1000, 1, int64_t{1} << 40)) {}
  Sizes(bool quick, int64_t ops)
      : dispatch_ops(ops),
        copy_bytes(quick ? dc::Sizes::kKiB * 64 : dc::Sizes::kMiB * 64),
        cuda_dispatch_ops(quick ? 1000 : 100 * 1000),
        cuda_copy_bytes(quick ? dc::Sizes::kMiB : dc::Sizes::kMiB * 1024) {}
  int64_t dispatch_ops;       // per timed call of mw.dispatch.async
  int64_t copy_bytes;         // float32: a multiple of 4
  int64_t cuda_dispatch_ops;  // per timed call of mw.cuda.dispatch.async
  int64_t cuda_copy_bytes;
  int64_t rtt_bytes = 8;
};

// Deterministic values every element of which a receiver can check.
float pattern(int64_t i) { return static_cast<float>(i % 8191) - 4095.0f; }

void check_pattern(const float* p, int64_t n, const std::string& what) {
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] != pattern(i)) {
      throw std::runtime_error(fmt::format("{} gave element {} = {}, expected {}", what, i, p[i], pattern(i)));
    }
  }
}

void check_all(const Tensor& t, float expected, const std::string& what) {
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] != expected) {
      throw std::runtime_error(fmt::format("{} gave element {} = {}, expected {}", what, i, p[i], expected));
    }
  }
}

using Clock = std::chrono::steady_clock;

// Durations of single iterations. The first is left out of every statistic: it is
// the DistTimer's warm-up call (first touch, connection set-up).
class Samples {
 public:
  void add(Clock::duration d) {
    if (skipped_) {
      us_.push_back(std::chrono::duration<double, std::micro>(d).count());
    } else {
      skipped_ = true;
    }
  }
  // NaN without samples (a filtered-out figure, which report() then skips).
  double median_us() const { return quantile(0.5); }
  // "# mw.sync.rtt: 5012 round trips, us: p10 80.1, median 95.3, p90 140.2" on stderr.
  void describe(const std::string& name) const {
    if (us_.empty()) return;
    fmt::print(std::cerr, "# {}: {} round trips, us: p10 {:.1f}, median {:.1f}, p90 {:.1f}\n", name, us_.size(),
               quantile(0.1), quantile(0.5), quantile(0.9));
  }

 private:
  double quantile(double q) const {
    if (us_.empty()) return std::numeric_limits<double>::quiet_NaN();
    std::vector<double> v = us_;
    const auto k = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
  }

  bool skipped_ = false;
  std::vector<double> us_;
};

class Figures {
 public:
  Figures(Context& ctx, const FigureSettings& s)
      : ctx_(ctx),
        s_(s),
        sizes_(ctx.options()),
        timer_(s.store, master() ? 0 : 1, 2, ctx.options(), std::cerr) {}

  void run() {
    connect_raw_tcp();
    if (s_.figures == FigureSet::Streams) {
      event_latency();
      overlap();
    } else if (s_.figures == FigureSet::Graphs) {
      graph_step();
    } else if (s_.figures == FigureSet::Cuda) {
      cuda_dispatch();
      cuda_upload();
    } else {
      dispatch();
      round_trip();
      copies();
    }
    timer_.barrier();  // the peer's last operation is done
  }

 private:
  bool master() const { return s_.role == Role::Master; }
  bool quick() const { return ctx_.options().quick; }

  void connect_raw_tcp() {
    constexpr const char* kKey = "bench/dispatch/raw_tcp";
    raw_.emplace(master() ? dc::RawTcpConnection::connect(*s_.store, kKey, s_.timeout)
                          : dc::RawTcpConnection::listen(*s_.store, kKey, s_.timeout));
  }

  // A case only the master takes part in (the peer passes the DistTimer's barriers).
  dc::DistCase master_case(const std::string& name, std::function<void(int64_t)> run) const {
    if (!master()) return {name, [](int64_t) {}};
    return {name, std::move(run)};
  }

  // The plain-socket round trips: the master times each into `ref`, the peer answers.
  dc::DistCase ref_case(const std::string& name, Samples& ref) {
    return {name, [this, &ref](int64_t calls) {
              std::vector<uint8_t> ping(static_cast<size_t>(sizes_.rtt_bytes), 1), pong(ping.size(), 2);
              for (int64_t i = 0; i < calls; ++i) {
                if (!master()) {
                  raw_->recv_all(ping);
                  raw_->send_all(pong);
                  continue;
                }
                const auto t0 = Clock::now();
                raw_->send_all(ping);
                raw_->recv_all(pong);
                ref.add(Clock::now() - t0);
              }
            }};
  }

  void dispatch() {
    ctx_.begin_group("dispatch");
    const std::optional<double> rate = dispatch_rate("mw.dispatch.async", Device::cpu(), sizes_.dispatch_ops);
    if (rate) verdict("mw.dispatch.async", *rate, ">=", kDispatchTarget, "ops/s");
    graph_replay(rate);
    batch_bytes();
  }

  // The ops of mw.dispatch.async (`a + b` on 16 floats, results dropped) three ways:
  // in a plain local loop of thd::Tensor calls (ref.local.ops: what the worker's own
  // loop could do at best), and as a graph of kGraphOps of them on node 0 replayed
  // back to back, then thd::synchronize() (mw.graph.replay.ops), each
  // sizes_.dispatch_ops ops per timed call; with the ratios to the eager rate.
  void graph_replay(std::optional<double> eager) {
    const std::string local_name = "ref.local.ops";
    const std::string graph_name = "mw.graph.replay.ops";
    if (!ctx_.enabled(local_name) && !ctx_.enabled(graph_name)) return;
    const int64_t replays = std::max<int64_t>(1, sizes_.dispatch_ops / kGraphOps);
    const int64_t ops = replays * kGraphOps;
    Tensor la = Tensor::ones({kTinyElements}, kFloat32), lb = Tensor::full({kTinyElements}, 2.0f, kFloat32);
    std::optional<DistributedTensor> a, b, probe;
    Graph graph;
    if (master() && ctx_.enabled(graph_name)) {
      a = DistributedTensor::ones({kTinyElements}, kFloat32);
      b = DistributedTensor::full({kTinyElements}, 2.0f, kFloat32);
      graph = thd::capture([&] {
        for (int64_t i = 0; i + 1 < kGraphOps; ++i) (void)(*a + *b);
        probe = *a + *b;  // the graph's last result, checked after a replay
      });
      graph.replay();
      check_all(probe->get(), 3.0f, "a + b in a graph");
    }
    auto local = [&](int64_t calls) {
      for (int64_t c = 0; c < calls; ++c) {
        for (int64_t i = 0; i < ops; ++i) (void)(la + lb);
      }
    };
    auto replay = [&](int64_t calls) {
      for (int64_t c = 0; c < calls; ++c) {
        for (int64_t r = 0; r < replays; ++r) graph.replay();
        thd::synchronize();
      }
    };
    std::vector<dc::DistCase> cases;
    if (ctx_.enabled(local_name)) cases.push_back(master_case(local_name, local));
    if (ctx_.enabled(graph_name)) cases.push_back(master_case(graph_name, replay));
    const std::vector<double> t = timer_.time(ctx_, cases);
    if (!master()) return;
    std::optional<double> local_rate, graph_rate;
    size_t k = 0;
    if (ctx_.enabled(local_name)) local_rate = static_cast<double>(ops) / t[k++];
    if (ctx_.enabled(graph_name)) graph_rate = static_cast<double>(ops) / t[k++];
    if (local_rate) ctx_.report(local_name, *local_rate, "ops/s");
    if (!graph_rate) return;
    ctx_.report(graph_name, *graph_rate, "ops/s");
    if (ctx_.options().verbose) {
      fmt::print(std::cerr, "# {}: {} replays of a {}-op graph per timed call, graph memory on node 0 {} B\n",
                 graph_name, replays, kGraphOps, graph.memory_bytes(0));
    }
    if (local_rate) {
      ctx_.report("ratio.mw.graph.replay.local", *graph_rate / *local_rate, "x");
      verdict("ratio.mw.graph.replay.local", *graph_rate / *local_rate, ">=", kGraphVsLocalTarget, "x");
    }
    if (eager) {
      ctx_.report("ratio.mw.graph.replay.eager", *graph_rate / *eager, "x");
      verdict("ratio.mw.graph.replay.eager", *graph_rate / *eager, ">=", kGraphVsEagerTarget, "x");
    }
  }

  // One data-parallel step on every node of `model`: forward, backward, the
  // gradients summed by all_reduce, the update in place.
  struct Replica {
    DistributedTensor x, target, w;
  };
  static void dp_step(std::vector<Replica>& model) {
    std::vector<DistributedTensor> grads;
    for (size_t n = 0; n < model.size(); ++n) {
      NodeScope on(static_cast<int>(n));
      Replica& r = model[n];
      grads.push_back(r.x.t().matmul(r.x.matmul(r.w) - r.target).div(64.0));
    }
    all_reduce(grads, ReduceOp::Sum);
    for (size_t n = 0; n < model.size(); ++n) {
      NodeScope on(static_cast<int>(n));
      model[n].w.sub_(grads[n] * 0.01);
    }
  }
  static std::vector<Replica> dp_model() {
    std::vector<Replica> model;
    for (int n = 0; n < thd::num_nodes(); ++n) {
      NodeScope on(n);
      model.push_back({DistributedTensor::full({16, 32}, 0.01f * static_cast<float>(n + 1)),
                       DistributedTensor::ones({16, 8}), DistributedTensor::full({32, 8}, 0.1f)});
    }
    return model;
  }

  // mw.eager.step and mw.graph.step: the same step on two copies of the model,
  // eager and replayed; both must end with the same weights.
  void graph_step() {
    ctx_.begin_group("graphs");
    const std::string eager_name = "mw.eager.step", graph_name = "mw.graph.step";
    if (!ctx_.enabled(eager_name) || !ctx_.enabled(graph_name)) return;  // only side by side
    const int64_t steps = quick() ? 5 : 100;
    std::vector<Replica> eager_model, graph_model;
    Graph graph;
    if (master()) {
      eager_model = dp_model();
      graph_model = dp_model();
      graph = thd::capture([&] { dp_step(graph_model); });
    }
    auto eager = [&](int64_t calls) {
      for (int64_t c = 0; c < calls; ++c) {
        for (int64_t s = 0; s < steps; ++s) dp_step(eager_model);
        thd::synchronize();
      }
    };
    auto replay = [&](int64_t calls) {
      for (int64_t c = 0; c < calls; ++c) {
        for (int64_t s = 0; s < steps; ++s) graph.replay();
        thd::synchronize();
      }
    };
    const std::vector<double> t =
        timer_.time(ctx_, {master_case(eager_name, eager), master_case(graph_name, replay)});
    if (!master()) return;
    // The timer ran the two cases different numbers of times: the check is on a
    // fresh pair of models, 20 steps each way.
    std::vector<Replica> check_eager = dp_model(), check_graph = dp_model();
    Graph check = thd::capture([&] { dp_step(check_graph); });
    for (int s = 0; s < 20; ++s) {
      dp_step(check_eager);
      check.replay();
    }
    if (check_eager[0].w.get().to_vector<float>() != check_graph[0].w.get().to_vector<float>()) {
      throw std::runtime_error("mw.graph.step: the replayed step's weights differ from the eager step's");
    }
    const double eager_us = t[0] / static_cast<double>(steps) * 1e6, graph_us = t[1] / static_cast<double>(steps) * 1e6;
    ctx_.report(eager_name, eager_us, "us");
    ctx_.report(graph_name, graph_us, "us");
    ctx_.report("ratio.mw.graph.step", graph_us / eager_us, "x");
    verdict("ratio.mw.graph.step", graph_us / eager_us, "<=", kGraphStepTarget, "x");
  }

  // mw.batch.bytes.one_op: what one op alone costs on the wire, as node 0's
  // DataChannel counts what it receives (thd::stats), plus the header tcp sends a
  // small message with. Between two stats() calls, the node receives the
  // second's request; with one op flushed on its own in between (the master's
  // flusher sends a buffer left idle), it receives that batch too. The difference
  // of the two is the batch.
  void batch_bytes() {
    const std::string name = "mw.batch.bytes.one_op";
    if (!master() || !ctx_.enabled(name)) return;
    DistributedTensor a = DistributedTensor::ones({kTinyElements}, kFloat32);
    DistributedTensor b = DistributedTensor::ones({kTinyElements}, kFloat32);
    thd::synchronize();
    const auto received = [] {
      const NodeStats s = thd::stats().at(0);
      return std::pair{s.bytes_received, s.messages_received};
    };
    for (int attempt = 0; attempt < 20; ++attempt) {
      const auto s0 = received();
      const auto s1 = received();  // s1 - s0: one stats request
      // Kept until measured: a result dropped at once would send its Free along.
      const DistributedTensor c = a + b;
      std::this_thread::sleep_for(std::chrono::milliseconds(20 << std::min(attempt, 4)));
      const auto s2 = received();  // s2 - s1: the op's batch and one stats request
      if (s1.second - s0.second != 1 || s2.second - s1.second != 2) continue;  // not flushed alone yet
      const uint64_t batch = (s2.first - s1.first) - (s1.first - s0.first);
      ctx_.report(name, static_cast<double>(batch + thd::detail::kSmallHeaderBytes), "B");
      verdict(name, static_cast<double>(batch + thd::detail::kSmallHeaderBytes), "<=", kOneOpBatchTarget, "B");
      return;
    }
    throw std::runtime_error("mw.batch.bytes.one_op: the op was never flushed on its own");
  }

  // `ops` tiny ops `a + b` on node 0's `device`, results dropped, issued back to back,
  // then thd::synchronize() (which waits for the worker, and its GPU). The rate, on
  // the master, when the figure ran.
  std::optional<double> dispatch_rate(const std::string& name, Device device, int64_t ops) {
    if (!ctx_.enabled(name)) return std::nullopt;
    std::optional<DistributedTensor> a, b;
    if (master()) {
      a = DistributedTensor::ones({kTinyElements}, kFloat32, device);
      b = DistributedTensor::full({kTinyElements}, 2.0f, kFloat32, device);
      check_all((*a + *b).get(), 3.0f, "a + b on " + device.str());
    }
    auto issue = [&](int64_t calls) {
      for (int64_t c = 0; c < calls; ++c) {
        for (int64_t i = 0; i < ops; ++i) (void)(*a + *b);
        thd::synchronize();
      }
    };
    const std::vector<double> t = timer_.time(ctx_, {master_case(name, issue)});
    if (!master()) return std::nullopt;
    const double rate = static_cast<double>(ops) / t[0];
    ctx_.report(name, rate, "ops/s");
    return rate;
  }

  // Each round trip is timed on its own, on the master (the peer only answers), and
  // the median over all of them is reported: a load spike on this shared machine
  // moves the median less than the mean of a repetition, and no barrier skew
  // between the two processes enters a single round trip.
  void round_trip() {
    ctx_.begin_group("rtt");
    const std::string mw_name = "mw.sync.rtt";
    const std::string ref_name = "ref.tcp.p2p.rtt." + dc::size_label(sizes_.rtt_bytes);
    std::optional<DistributedTensor> x;
    constexpr float kX = 2.0f;
    constexpr float kExpected = (kX + 1.0f) * kTinyElements;
    if (master() && ctx_.enabled(mw_name)) x = DistributedTensor::full({kTinyElements}, kX);
    Samples mw, ref;
    auto mw_round_trips = [&](int64_t calls) {
      for (int64_t i = 0; i < calls; ++i) {
        const auto t0 = Clock::now();
        const float v = (*x + 1).sum().item<float>();
        mw.add(Clock::now() - t0);
        if (v != kExpected) throw std::runtime_error(fmt::format("(x + 1).sum() gave {}, expected {}", v, kExpected));
      }
    };
    (void)timer_.time(ctx_, {master_case(mw_name, mw_round_trips), ref_case(ref_name, ref)});
    if (!master()) return;
    const double mw_us = mw.median_us(), ref_us = ref.median_us();
    if (ctx_.options().verbose) {
      mw.describe(mw_name);
      ref.describe(ref_name);
    }
    ctx_.report(mw_name, mw_us, "us");
    ctx_.report(ref_name, ref_us, "us");
    // Of times, not rates: below 1 the runtime is faster.
    ctx_.report("ratio.mw.sync.rtt", mw_us / ref_us, "x");
    verdict("ratio.mw.sync.rtt", mw_us / ref_us, "<=", kRttTarget, "x");
  }

  void copies() {
    ctx_.begin_group("copy");
    const int64_t bytes = sizes_.copy_bytes;
    const std::string size = dc::size_label(bytes);
    const std::string to_name = "mw.copy.to_worker." + size;
    const std::string from_name = "mw.copy.from_worker." + size;
    const std::string ref_name = "ref.tcp.p2p.bw." + size;
    if (!(ctx_.enabled(to_name) || ctx_.enabled(from_name) || ctx_.enabled(ref_name))) return;

    Tensor local = Tensor::empty({bytes / 4}, kFloat32);
    float* p = local.data<float>();
    for (int64_t i = 0; i < local.numel(); ++i) p[i] = master() ? pattern(i) : 0.0f;
    const std::span<uint8_t> raw_bytes(static_cast<uint8_t*>(local.data_ptr()), local.nbytes());
    std::vector<uint8_t> ack(1, 0);

    std::optional<DistributedTensor> remote;
    if (master() && (ctx_.enabled(to_name) || ctx_.enabled(from_name))) {
      // One round trip through the worker, checked: both directions carry every byte.
      remote = local.dist_send();
      const Tensor back = remote->get();
      check_pattern(back.data<float>(), back.numel(), "dist_send then get() of " + size);
    }
    auto ref_send = [&](int64_t calls) {
      for (int64_t i = 0; i < calls; ++i) {
        if (master()) raw_->send_all(raw_bytes);
        if (!master()) raw_->recv_all(raw_bytes);
      }
      if (master()) raw_->recv_all(ack);
      if (!master()) raw_->send_all(ack);
    };
    if (ctx_.enabled(ref_name)) {
      ref_send(1);
      if (!master()) check_pattern(p, local.numel(), "the plain socket's transfer of " + size);
    }

    auto upload = [&](int64_t calls) {
      for (int64_t i = 0; i < calls; ++i) (void)local.dist_send();
      thd::synchronize();
    };
    auto download = [&](int64_t calls) {
      for (int64_t i = 0; i < calls; ++i) (void)remote->get();
    };
    const std::vector<double> t =
        timer_.time(ctx_, {master_case(to_name, upload), master_case(from_name, download), {ref_name, ref_send}});
    if (!master()) return;
    const auto rate = [&](double seconds) { return static_cast<double>(bytes) / seconds / kGiga; };
    ctx_.report(to_name, rate(t[0]), "GB/s");
    ctx_.report(from_name, rate(t[1]), "GB/s");
    ctx_.report(ref_name, rate(t[2]), "GB/s");
    ctx_.report("ratio.mw.copy.to_worker", t[2] / t[0], "x");
    ctx_.report("ratio.mw.copy.from_worker", t[2] / t[1], "x");
    verdict("ratio.mw.copy.to_worker", t[2] / t[0], ">=", kCopyTarget, "x");
    verdict("ratio.mw.copy.from_worker", t[2] / t[1], ">=", kCopyTarget, "x");
  }

  // One sample: node 1's stream is already waiting (its EventWaitRemote queued,
  // which the stream query makes sure of) when node 0's record runs (node 0's stream
  // is held on a latch, opened from its other stream).
  double one_event_latency_us(Stream& s0, Stream& s0_opener, Stream& s1, uint64_t latch) {
    Event sent(/*enable_timing=*/true);
    Event seen(/*enable_timing=*/true);
    {
      StreamScope in(s0);
      detail::test_latch_wait(latch, std::chrono::duration_cast<std::chrono::milliseconds>(s_.timeout));
    }
    sent.record(s0);
    s1.wait(sent);
    seen.record(s1);
    (void)s1.query();  // node 1 has the wait by now
    {
      StreamScope in(s0_opener);
      detail::test_latch_open(latch);
    }
    (void)s0_opener.query();  // sends it
    seen.synchronize();
    const int64_t a = detail::event_time_ns(sent);
    const int64_t b = detail::event_time_ns(seen);
    if (a == 0 || b == 0 || b < a) {
      throw std::runtime_error(fmt::format("cross-node event times out of order: {} then {}", a, b));
    }
    return static_cast<double>(b - a) / 1e3;
  }

  void event_latency() {
    ctx_.begin_group("event");
    const std::string name = "streams.event.cross_node.latency";
    const std::string ref_name = "ref.tcp.p2p.rtt." + dc::size_label(sizes_.rtt_bytes);
    std::optional<Stream> s0, opener, s1;
    if (master() && ctx_.enabled(name)) {
      s0 = Stream::create(0);
      opener = Stream::create(0);
      s1 = Stream::create(1);
    }
    std::vector<double> latency_us;
    uint64_t latch = 1;
    bool warm = false;
    auto events = [&](int64_t calls) {
      for (int64_t i = 0; i < calls; ++i) {
        const double us = one_event_latency_us(*s0, *opener, *s1, latch++);
        if (warm) latency_us.push_back(us);
        warm = true;
      }
    };
    Samples ref;
    (void)timer_.time(ctx_, {master_case(name, events), ref_case(ref_name, ref)});
    if (!master() || latency_us.empty()) return;
    std::nth_element(latency_us.begin(), latency_us.begin() + static_cast<std::ptrdiff_t>(latency_us.size() / 2),
                     latency_us.end());
    const double median = latency_us[latency_us.size() / 2];
    const double ref_us = ref.median_us();
    ctx_.report(name, median, "us");
    ctx_.report(ref_name, ref_us, "us");
    ctx_.report("ratio.streams.event.cross_node", median / ref_us, "x");
    verdict("ratio.streams.event.cross_node", median / ref_us, "<=", 1.0, "x");
  }

  void overlap() {
    ctx_.begin_group("overlap");
    const std::string one = "streams.one_stream", two = "streams.two_streams";
    if (!(ctx_.enabled(one) || ctx_.enabled(two))) return;
    constexpr int64_t kElements = 16384;  // below the intra-op grain: one core per op
    const int kSteps = quick() ? 20 : 2000;
    std::optional<Stream> a, b;
    std::optional<DistributedTensor> x, y;
    if (master()) {
      a = Stream::create(0);
      b = Stream::create(0);
      x = DistributedTensor::zeros({kElements});
      y = DistributedTensor::zeros({kElements});
      thd::synchronize();
    }
    auto chains = [&](Stream& first, Stream& second, int64_t calls) {
      for (int64_t c = 0; c < calls; ++c) {
        {
          StreamScope in(first);
          for (int i = 0; i < kSteps; ++i) x->add_(1);
        }
        {
          StreamScope in(second);
          for (int i = 0; i < kSteps; ++i) y->add_(1);
        }
        first.synchronize();
        second.synchronize();
      }
    };
    const std::vector<double> t =
        timer_.time(ctx_, {master_case(one, [&](int64_t calls) { chains(*a, *a, calls); }),
                           master_case(two, [&](int64_t calls) { chains(*a, *b, calls); })});
    if (!master()) return;
    ctx_.report(one, t[0] * 1e3, "ms");
    ctx_.report(two, t[1] * 1e3, "ms");
    ctx_.report("streams.overlap.ratio", t[1] / t[0], "x");
  }

  // Tiny ops on node 0's GPU, as mw.dispatch.async does them on its CPU: the master's
  // and the worker's cost per op plus a kernel launch, the GPU never the limit.
  void cuda_dispatch() {
    ctx_.begin_group("cuda.dispatch");
    (void)dispatch_rate("mw.cuda.dispatch.async", Device::cuda(0), sizes_.cuda_dispatch_ops);
  }

  // dist_send of 1 GiB to node 0's cuda:0 (through the worker's host memory), next
  // to the same bytes copied to a GPU by this process itself (Tensor::cuda(), pinned
  // staging: what the worker's last step does).
  void cuda_upload() {
    ctx_.begin_group("cuda.copy");
    const int64_t bytes = sizes_.cuda_copy_bytes;
    const std::string size = dc::size_label(bytes);
    const std::string name = "mw.cuda.copy.to_worker." + size;
    const std::string ref_name = "ref.cuda.h2d." + size;
    if (!(ctx_.enabled(name) || ctx_.enabled(ref_name))) return;
    Tensor local;
    if (master()) {
      local = Tensor::empty({bytes / 4}, kFloat32);
      float* p = local.data<float>();
      for (int64_t i = 0; i < local.numel(); ++i) p[i] = pattern(i);
      const Tensor back = DistributedTensor::from(local, 0, Device::cuda(0)).get();
      check_pattern(back.data<float>(), back.numel(), "dist_send to cuda:0 then get() of " + size);
    }
    auto upload = [&](int64_t calls) {
      for (int64_t i = 0; i < calls; ++i) (void)DistributedTensor::from(local, 0, Device::cuda(0));
      thd::synchronize();
    };
    auto local_copy = [&](int64_t calls) {
      for (int64_t i = 0; i < calls; ++i) (void)local.cuda(0);
      cuda::synchronize(0);
    };
    const std::vector<double> t = timer_.time(ctx_, {master_case(name, upload), master_case(ref_name, local_copy)});
    if (!master()) return;
    const auto rate = [&](double seconds) { return static_cast<double>(bytes) / seconds / kGiga; };
    ctx_.report(name, rate(t[0]), "GB/s");
    ctx_.report(ref_name, rate(t[1]), "GB/s");
    ctx_.report("ratio.mw.cuda.copy.to_worker", t[1] / t[0], "x");
  }

  // "target ratio.mw.sync.rtt <= 3 x: 1.84 x, met" on stderr, for a measured figure
  // of a full run (--quick times one call: no measurement to hold to a target).
  void verdict(const std::string& name, double value, std::string_view op, double target, std::string_view unit) const {
    if (quick() || !ctx_.enabled(name) || !std::isfinite(value)) return;
    const bool met = op == ">=" ? value >= target : value <= target;
    fmt::print(std::cerr, "thd-bench {}: target {} {} {:g} {}: {:.2f} {}, {}\n",
               s_.figures == FigureSet::Streams  ? "streams"
               : s_.figures == FigureSet::Graphs ? "graphs"
                                                 : "dispatch",
               name, op, target, unit, value,
               unit, met ? "met" : "MISSED");
  }

  Context& ctx_;
  FigureSettings s_;
  Sizes sizes_;
  dc::DistTimer timer_;
  std::optional<dc::RawTcpConnection> raw_;
};

}  // namespace

void run_figures(Context& ctx, const FigureSettings& settings) { Figures(ctx, settings).run(); }

}  // namespace thd::bench::mw
