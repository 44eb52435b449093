#include "bench/datachannel/rank.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <vector>

#include <thd/datachannel.h>
#include <thd/store.h>
#include <thd/tensor.h>

#include "bench/datachannel/dist_timer.h"
#include "bench/datachannel/raw_tcp.h"
#if THD_BENCH_RAW_UCX
#include "bench/datachannel/raw_ucx.h"
#endif
#include "bench/datachannel/sizes.h"
#include "bench/datachannel/ucx_reference.h"

namespace thd::bench::dc {
namespace {

constexpr double kGiga = 1e9;
constexpr int64_t kDataTag = 1;
constexpr int64_t kAckTag = 2;

// Rank 0's figures go to the launcher through stdout, at full precision: the
// launcher prints them rounded and computes the MPI ratio from them.
class Figures {
 public:
  Figures(const Context& ctx, int rank) : ctx_(ctx), rank_(rank) {}
  void emit(const std::string& name, double value, std::string_view unit) const {
    if (rank_ != 0 || !ctx_.enabled(name) || !std::isfinite(value)) return;
    fmt::print(stdout, "{} {:.17g} {}\n", name, value, unit);
    std::fflush(stdout);
  }

 private:
  const Context& ctx_;
  int rank_;
};

// Deterministic values every element of which a receiver can check.
float pattern(int64_t i) { return static_cast<float>(i % 8191) - 4095.0f; }

void fill_pattern(Tensor& t) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = pattern(i);
}

void check_elements(const Tensor& t, const std::function<float(int64_t)>& expected, const std::string& what) {
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] != expected(i)) {
      throw std::runtime_error(fmt::format("{} gave element {} = {}, expected {}", what, i, p[i], expected(i)));
    }
  }
}

class RankBench {
 public:
  RankBench(Context& ctx, const RankSettings& s, std::shared_ptr<Store> store)
      : ctx_(ctx),
        s_(s),
        store_(std::move(store)),
        sizes_(ctx.options().quick),
        figures_(ctx, s.rank),
        timer_(store_, s.rank, s.world_size, ctx.options(), std::cerr) {}

  void run() {
    channel_ = DataChannel::create(
        s_.backend, {.store = store_, .rank = s_.rank, .world_size = s_.world_size, .timeout = s_.timeout});
    connect_raw_tcp();
    connect_raw_ucx();
    p2p_rtt();
    p2p_bandwidth();
    all_reduce();
    all_reduce_latency();
    broadcast();
    timer_.barrier();  // every rank's last operation is done
    channel_.reset();
#if THD_BENCH_RAW_UCX
    raw_ucx_.reset();
#endif
  }

 private:
  std::string dc(const std::string& rest) const { return "dc." + s_.backend + "." + rest; }
  // The plain-socket reference is TCP whatever the backend compared with it.
  static std::string ref(const std::string& rest) { return "ref.tcp." + rest; }
  std::string ratio(const std::string& rest) const { return "ratio.dc." + s_.backend + "." + rest; }
  int rank() const { return s_.rank; }

  void connect_raw_tcp() {
    constexpr const char* kKey = "bench/raw_tcp";
    if (rank() == 1) raw_ = std::make_unique<RawTcpConnection>(RawTcpConnection::listen(*store_, kKey, s_.timeout));
    if (rank() == 0) raw_ = std::make_unique<RawTcpConnection>(RawTcpConnection::connect(*store_, kKey, s_.timeout));
  }

  // The ucx backend's in-run reference (raw_ucx.h), between ranks 0 and 1.
  void connect_raw_ucx() {
#if THD_BENCH_RAW_UCX
    if (s_.backend == "ucx" && rank() < 2) {
      raw_ucx_ = RawUcxConnection::connect(*store_, "bench/raw_ucx", rank(), s_.timeout);
    }
#endif
  }

  // `calls` round trips between ranks 0 and 1 through `send` and `recv` (each to or
  // from the other rank): rank 0 sends `ping` and receives `pong`, rank 1 the
  // reverse. Other ranks take no part.
  template <typename Send, typename Recv>
  void round_trips(int64_t calls, std::vector<uint8_t>& ping, std::vector<uint8_t>& pong, Send send, Recv recv) {
    for (int64_t i = 0; i < calls; ++i) {
      if (rank() == 0) {
        send(ping);
        recv(pong);
      } else if (rank() == 1) {
        recv(ping);
        send(pong);
      }
    }
  }

  // One round trip of 8 bytes between ranks 0 and 1 per call. With the ucx backend
  // also UCX's own ucx_perftest and raw UCX in the ranks, each a case of the same
  // repetitions: this VM changes speed within seconds (round trips of 0.16, 0.35
  // or 1.3 us), and ucx_perftest run after the ranks caught another state than the
  // figure in three runs of five. Their ratios are taken repetition by repetition
  // (DistTimer::paired_ratio).
  void p2p_rtt() {
    ctx_group("p2p.rtt");
    const std::string size = size_label(sizes_.rtt_bytes);
    std::vector<uint8_t> ping(static_cast<size_t>(sizes_.rtt_bytes), 1), pong(ping.size(), 2);
    const int peer = 1 - rank();  // for ranks 0 and 1, the only ones taking part
    // Every rank lists the same cases: the ucx ones on all of them. ucx_perftest
    // runs just before the channel's case and raw UCX just after it: the VM's state
    // changes within a second, so the references are kept next to the figure.
    std::vector<DistCase> cases;
    const bool with_ucx = s_.backend == "ucx";
    const bool with_perftest = with_ucx && ucx_perftest_built();
    const size_t perftest = cases.size();
    if (with_perftest) {
      const UcxPerftestRun run{.test = "tag_lat", .bytes = sizes_.rtt_bytes, .iterations = 20000};
      cases.push_back({"ref.ucx_perftest.p2p.rtt." + size, nullptr,
                       [run] { return 2 * run_ucx_perftest(run).latency_us * 1e-6; }});
    }
    const size_t channel = cases.size();
    cases.push_back({dc("p2p.rtt." + size), [&](int64_t calls) {
                       round_trips(
                           calls, ping, pong, [&](auto& b) { channel_->send_bytes(b, peer); },
                           [&](auto& b) { channel_->recv_bytes(b, peer); });
                     }});
#if THD_BENCH_RAW_UCX
    const size_t raw_ucx = cases.size();
    if (with_ucx) {
      cases.push_back({"ref.raw_ucx.p2p.rtt." + size, [&](int64_t calls) {
                         round_trips(
                             calls, ping, pong, [&](auto& b) { raw_ucx_->send(b); },
                             [&](auto& b) { raw_ucx_->recv(b); });
                       }});
    }
#endif
    const size_t tcp = cases.size();
    cases.push_back({ref("p2p.rtt." + size), [&](int64_t calls) {
                       round_trips(
                           calls, ping, pong, [&](auto& b) { raw_->send_all(b); },
                           [&](auto& b) { raw_->recv_all(b); });
                     }});
    // The same round trip through the tensor calls, the API programs use: what
    // send/recv of a host tensor add to send_bytes/recv_bytes (their checks and the
    // tensor's accessors). Last, so the references stay next to the bytes' figure.
    const size_t tensors = cases.size();
    Tensor tensor_ping = Tensor::zeros({sizes_.rtt_bytes}, kUInt8);
    Tensor tensor_pong = Tensor::zeros({sizes_.rtt_bytes}, kUInt8);
    cases.push_back({dc("p2p.rtt.tensor." + size), [&](int64_t calls) {
                       for (int64_t i = 0; i < calls; ++i) {
                         if (rank() == 0) {
                           channel_->send(tensor_ping, peer);
                           channel_->recv(tensor_pong, peer);
                         } else if (rank() == 1) {
                           channel_->recv(tensor_ping, peer);
                           channel_->send(tensor_pong, peer);
                         }
                       }
                     }});
    // And with requests, as MPI programs exchange: the answer's receive posted
    // before the send, each waited for.
    const size_t async = cases.size();
    cases.push_back({dc("p2p.rtt.async." + size), [&](int64_t calls) {
                       for (int64_t i = 0; i < calls; ++i) {
                         if (rank() == 0) {
                           Request answer = channel_->irecv(tensor_pong, peer);
                           channel_->isend(tensor_ping, peer).wait();
                           answer.wait();
                         } else if (rank() == 1) {
                           channel_->irecv(tensor_ping, peer).wait();
                           channel_->isend(tensor_pong, peer).wait();
                         }
                       }
                     }});
    const std::vector<double> t = timer_.time(ctx_, cases);
    // Of times, not rates: below 1 the channel is faster. Repetition by repetition
    // (paired_ratio); under --quick, of the one call.
    auto paired = [&](size_t reference) {
      const double r = timer_.paired_ratio(channel, reference);
      return std::isfinite(r) ? r : t[channel] / t[reference];
    };
    figures_.emit(dc("p2p.rtt." + size), t[channel] * 1e6, "us");
    figures_.emit(ref("p2p.rtt." + size), t[tcp] * 1e6, "us");
    figures_.emit(ratio("p2p.rtt"), t[channel] / t[tcp], "x");
    figures_.emit(dc("p2p.rtt.tensor." + size), t[tensors] * 1e6, "us");
    figures_.emit(dc("p2p.rtt.async." + size), t[async] * 1e6, "us");
#if THD_BENCH_RAW_UCX
    if (with_ucx) {
      figures_.emit("ref.raw_ucx.p2p.rtt." + size, t[raw_ucx] * 1e6, "us");
      figures_.emit(ratio("p2p.rtt.vs_raw_ucx"), paired(raw_ucx), "x");
    }
#endif
    if (with_perftest) {
      figures_.emit("ref.ucx_perftest.p2p.rtt." + size, t[perftest] * 1e6, "us");
      figures_.emit(ratio("p2p.rtt.vs_ucx_perftest"), paired(perftest), "x");
    }
  }

  // Rank 0 sends `calls` tensors to rank 1, which acknowledges the last one.
  void p2p_bandwidth() {
    ctx_group("p2p.bw");
    const int64_t bytes = sizes_.bw_bytes;
    const std::string size = size_label(bytes);
    Tensor data = Tensor::empty({bytes / 4}, kFloat32);
    std::vector<uint8_t> ack(1, 0);
    auto raw_bytes = [&] { return std::span<uint8_t>(static_cast<uint8_t*>(data.data_ptr()), data.nbytes()); };
    if (rank() == 0) fill_pattern(data);

    auto dc_send = [&](int64_t calls) {
      for (int64_t i = 0; i < calls; ++i) {
        if (rank() == 0) channel_->send(data, 1, {.tag = kDataTag});
        if (rank() == 1) channel_->recv(data, 0, {.tag = kDataTag});
      }
      if (rank() == 0) channel_->recv_bytes(ack, 1, {.tag = kAckTag});
      if (rank() == 1) channel_->send_bytes(ack, 0, {.tag = kAckTag});
    };
    auto ref_send = [&](int64_t calls) {
      for (int64_t i = 0; i < calls; ++i) {
        if (rank() == 0) raw_->send_all(raw_bytes());
        if (rank() == 1) raw_->recv_all(raw_bytes());
      }
      if (rank() == 0) raw_->recv_all(ack);
      if (rank() == 1) raw_->send_all(ack);
    };
    const std::string dc_name = dc("p2p.bw." + size), ref_name = ref("p2p.bw." + size);
    if (ctx_.enabled(dc_name)) verify_p2p(data, dc_send, "send/recv");
    if (ctx_.enabled(ref_name)) verify_p2p(data, ref_send, "the raw tcp reference");
    const std::vector<double> t = timer_.time(ctx_, {{dc_name, dc_send}, {ref_name, ref_send}});
    const double dc_rate = static_cast<double>(bytes) / t[0] / kGiga;
    const double ref_rate = static_cast<double>(bytes) / t[1] / kGiga;
    figures_.emit(dc_name, dc_rate, "GB/s");
    figures_.emit(ref_name, ref_rate, "GB/s");
    figures_.emit(ratio("p2p.bw"), dc_rate / ref_rate, "x");
  }

  // One transfer whose every element rank 1 checks.
  void verify_p2p(Tensor& data, const std::function<void(int64_t)>& transfer, const std::string& what) {
    if (rank() == 1) data.fill_(0);
    transfer(1);
    if (rank() == 1) check_elements(data, pattern, what + " of " + size_label(static_cast<int64_t>(data.nbytes())));
  }

  void all_reduce() {
    ctx_group("allreduce");
    all_reduce_figures(kFloat32, "allreduce", sizes_.allreduce_bytes);
    all_reduce_figures(kFloat16, "allreduce.f16", sizes_.allreduce_f16_bytes);
  }

  // all_reduce sum of `dtype` tensors of each size; `what` names the figures.
  void all_reduce_figures(DType dtype, const std::string& what, const std::vector<int64_t>& sizes) {
    const int n = s_.world_size;
    const auto elem = static_cast<int64_t>(element_size(dtype));
    std::vector<Tensor> tensors;
    std::vector<DistCase> cases;
    for (int64_t bytes : sizes) tensors.push_back(Tensor::empty({bytes / elem}, dtype));
    for (size_t k = 0; k < tensors.size(); ++k) {
      Tensor& t = tensors[k];
      const std::string label = size_label(sizes[k]);
      const std::string name = dc(fmt::format("{}.n{}.{}.busbw", what, n, label));
      if (!ctx_.enabled(name)) {
        cases.push_back({name, nullptr});
        continue;
      }
      // Every rank contributes rank + 1: each element must sum to n(n+1)/2.
      t.fill_(rank() + 1);
      channel_->all_reduce(t);
      const float expected = static_cast<float>(n * (n + 1) / 2);
      check_elements(t.to(kFloat32), [&](int64_t) { return expected; },
                     fmt::format("all_reduce of {} {}", label, dtype_name(dtype)));
      // Zeros stay zeros: repeated sums neither overflow nor go denormal.
      t.fill_(0);
      cases.push_back({name, [this, tensor = &t](int64_t calls) {
                         for (int64_t i = 0; i < calls; ++i) channel_->all_reduce(*tensor);
                       }});
    }
    const std::vector<double> t = timer_.time(ctx_, cases);
    for (size_t k = 0; k < cases.size(); ++k) {
      // nccl-tests' bus bandwidth: what each rank's link carries in a ring algorithm
      // (of the tensor's own bytes, whatever the wire carries).
      const double algbw = static_cast<double>(sizes[k]) / t[k] / kGiga;
      figures_.emit(cases[k].name, algbw * 2.0 * (n - 1) / n, "GB/s");
    }
  }

  // A small all_reduce's time, called blocking (on the caller's thread) and as
  // torch.distributed's async_op=True then wait() (on the collective engine; how
  // the Python package's blocking calls run too, to stay interruptible).
  void all_reduce_latency() {
    ctx_group("allreduce.latency");
    const int n = s_.world_size;
    constexpr int64_t kElements = 8;
    const std::string label = size_label(kElements * 4);
    const std::string blocking = dc(fmt::format("allreduce.latency.n{}.{}", n, label));
    const std::string async = dc(fmt::format("allreduce.async.latency.n{}.{}", n, label));
    Tensor t = Tensor::empty({kElements}, kFloat32);
    const float expected = static_cast<float>(n * (n + 1) / 2);
    for (const bool wait_async : {false, true}) {
      t.fill_(rank() + 1);
      if (wait_async) {
        channel_->iall_reduce(t).wait();
      } else {
        channel_->all_reduce(t);
      }
      check_elements(t, [&](int64_t) { return expected; }, wait_async ? "iall_reduce + wait" : "all_reduce");
    }
    t.fill_(0);
    std::vector<DistCase> cases;
    cases.push_back({blocking, ctx_.enabled(blocking) ? std::function<void(int64_t)>([this, &t](int64_t calls) {
                                 for (int64_t i = 0; i < calls; ++i) channel_->all_reduce(t);
                               })
                                                      : nullptr});
    cases.push_back({async, ctx_.enabled(async) ? std::function<void(int64_t)>([this, &t](int64_t calls) {
                              for (int64_t i = 0; i < calls; ++i) channel_->iall_reduce(t).wait();
                            })
                                                : nullptr});
    const std::vector<double> time = timer_.time(ctx_, cases);
    for (size_t k = 0; k < cases.size(); ++k) figures_.emit(cases[k].name, time[k] * 1e6, "us");
    figures_.emit(ratio(fmt::format("allreduce.async.latency.n{}.vs_blocking", n)), timer_.paired_ratio(1, 0), "x");
  }

  void broadcast() {
    ctx_group("broadcast");
    const int64_t bytes = sizes_.broadcast_bytes;
    const std::string name = dc(fmt::format("broadcast.n{}.{}.busbw", s_.world_size, size_label(bytes)));
    if (!ctx_.enabled(name)) return;
    Tensor t = Tensor::empty({bytes / 4}, kFloat32);
    if (rank() == 0) {
      fill_pattern(t);
    } else {
      t.fill_(0);
    }
    channel_->broadcast(t, 0);
    check_elements(t, pattern, "broadcast of " + size_label(bytes));
    auto run = [&](int64_t calls) {
      for (int64_t i = 0; i < calls; ++i) channel_->broadcast(t, 0);
    };
    const std::vector<double> time = timer_.time(ctx_, {{name, run}});
    // nccl-tests: a broadcast's bus bandwidth is its algorithm bandwidth.
    figures_.emit(name, static_cast<double>(bytes) / time[0] / kGiga, "GB/s");
  }

  // The group the filter also matches on (see Context::begin_group).
  void ctx_group(const std::string& group) { ctx_.begin_group(group); }

  Context& ctx_;
  RankSettings s_;
  std::shared_ptr<Store> store_;
  Sizes sizes_;
  Figures figures_;
  DistTimer timer_;
  std::shared_ptr<DataChannel> channel_;
  std::unique_ptr<RawTcpConnection> raw_;
#if THD_BENCH_RAW_UCX
  std::unique_ptr<RawUcxConnection> raw_ucx_;
#endif
};

// Rank 0 hosts the store: it may leave only after every other rank is done with it.
void leave(Store& store, int rank, int world_size) {
  if (rank != 0) {
    if (store.add("bench/left", 1) == world_size - 1) store.set("bench/left/all", std::string_view("1"));
    return;
  }
  if (world_size > 1) store.wait({"bench/left/all"});
}

}  // namespace

void run_rank(Context& ctx, const RankSettings& requested) {
  RankSettings settings = requested;
  RendezvousResult job;
  if (settings.from_mpi) {
    // mpirun is the parent, and every rank's stdout is the launcher's figure pipe.
    job = rendezvous("mpi://", -1, settings.world_size, settings.timeout);
    settings.rank = job.rank;
    if (job.rank != 0) ::dup2(STDERR_FILENO, STDOUT_FILENO);
  } else {
    die_with_parent(settings.parent_pid);
    job = rendezvous(fmt::format("tcp://127.0.0.1:{}", settings.master_port), settings.rank, settings.world_size,
                     settings.timeout);
  }
  {
    RankBench bench(ctx, settings, job.store);
    bench.run();
  }
  leave(*job.store, settings.rank, settings.world_size);
}

}  // namespace thd::bench::dc
