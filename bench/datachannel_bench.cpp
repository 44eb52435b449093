// The "datachannel" suite: DataChannel point-to-point and collectives among N local
// processes, next to plain TCP sockets and MPI doing the same on the same machine.
//
//   thd-bench datachannel [--backend tcp] [-n 4] [--timeout 600] [harness options]
//
// This process is the launcher: it starts N copies of itself as the ranks of one job
// (bench/datachannel/launcher.h), prints the figures rank 0 measured, then runs the
// MPI reference. Figures (sizes shrink under --quick; names say the size used; <b>
// is the backend, <N> the number of ranks):
//   dc.<b>.p2p.rtt.8B                 ping-pong of 8 bytes, ranks 0 <-> 1, one round trip    us
//   ref.tcp.p2p.rtt.8B                the same over a plain loopback TCP socket, busy-polled us
//   ratio.dc.<b>.p2p.rtt              dc / ref time (below 1: the channel is faster)         x
//   dc.<b>.p2p.rtt.tensor.8B          the ping-pong with send/recv of uint8 tensors          us
//   dc.<b>.p2p.rtt.async.8B           the same with irecv (posted first), isend, wait        us
//   ref.raw_ucx.p2p.rtt.8B            ucx only: the same with UCX itself in the ranks, timed  us
//                                     in the same repetitions (datachannel/raw_ucx.h)
//   ratio.dc.ucx.p2p.rtt.vs_raw_ucx   ucx only: median of the per-repetition dc / raw ratios  x
//   ref.ucx_perftest.p2p.rtt.8B       ucx only: ucx_perftest tag_lat's round trip, run by     us
//                                     rank 0 in each repetition, just before the channel's
//   ratio.dc.ucx.p2p.rtt.vs_ucx_perftest  ucx only: median of the per-repetition ratios      x
//   dc.<b>.p2p.bw.64MiB               tensors sent 0 -> 1, one 1-byte ack per repetition    GB/s
//   ref.tcp.p2p.bw.64MiB              the same over the plain socket                         GB/s
//   ratio.dc.<b>.p2p.bw               dc / ref rate                                          x
//   dc.<b>.allreduce.n<N>.<size>.busbw  all_reduce float32 sum, 4KiB, 1MiB, 64MiB           GB/s (nccl-tests busbw)
//   dc.<b>.allreduce.f16.n<N>.<size>.busbw  all_reduce float16 sum (float32 accumulation),  GB/s (of the float16
//                                     1MiB, 64MiB                                          bytes)
//   dc.<b>.allreduce.latency.n<N>.32B        a small all_reduce, blocking                     us
//   dc.<b>.allreduce.async.latency.n<N>.32B  the same as iall_reduce + wait (collective engine) us
//   ratio.dc.<b>.allreduce.async.latency.n<N>.vs_blocking  async / blocking time       x
//   dc.<b>.broadcast.n<N>.64MiB.busbw   broadcast from rank 0                                GB/s (busbw = algbw)
//   ref.mpi.allreduce.n<N>.64MiB.busbw  MPI_Allreduce under Open MPI over TCP (full runs)    GB/s
//   ratio.dc.<b>.allreduce.n<N>.64MiB.vs_mpi  dc / MPI bus bandwidth                         x
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/datachannel/launcher.h"
#include "bench/datachannel/mpi_reference.h"
#include "bench/datachannel/libfabric_reference.h"
#include "bench/datachannel/ucx_reference.h"
#include "bench/datachannel/rank.h"
#include "bench/datachannel/sizes.h"
#include "bench/harness.h"

namespace thd::bench {
namespace {

constexpr const char* kSuite = "datachannel";
constexpr int kMaxRanks = 64;

// A whole job's deadline, and each rank's for rendezvous and every operation.
constexpr std::chrono::seconds kJobTimeout{600};
constexpr std::chrono::seconds kQuickJobTimeout{60};
constexpr std::chrono::seconds kRankTimeout{120};
constexpr std::chrono::seconds kQuickRankTimeout{20};

int64_t integer_arg(const Options& opt, const std::string& flag, int64_t fallback, int64_t lo, int64_t hi) {
  return suite_integer_arg(opt, flag, fallback, lo, hi);
}

std::string backend_arg(const Options& opt) {
  const auto it = opt.suite_args.find("--backend");
  return it == opt.suite_args.end() ? "tcp" : it->second;
}

// One "name value unit" line from rank 0.
struct Figure {
  std::string name;
  double value = 0;
  std::string unit;
};

std::optional<Figure> parse_figure(const std::string& line) {
  std::istringstream in(line);
  Figure f;
  if (!(in >> f.name >> f.value >> f.unit) || !(in >> std::ws).eof()) return std::nullopt;
  return f;
}

// Every run of a reference, on stderr under --verbose (the figure is their median).
void print_runs(const Context& ctx, const std::string& what, const std::vector<dc::UcxPerftestResult>& runs,
                double (*value)(const dc::UcxPerftestResult&)) {
  if (!ctx.options().verbose) return;
  std::cerr << "# " << what << ": " << runs.size() << " runs:";
  for (const auto& r : runs) std::cerr << " " << value(r);
  std::cerr << "\n";
}

// The ucx backend's bandwidth next to UCX's own ucx_perftest tag_bw, with the same
// transports (the UCX_* environment is the ranks'): >= 0.9x. The reference is the
// median of --reps runs, as the figure is of --reps repetitions. (The round trip's
// reference, ucx_perftest tag_lat, runs inside the ranks' repetitions: rank.cpp.)
void run_ucx_reference(Context& ctx, const std::map<std::string, double>& measured) {
  ctx.begin_group("p2p");
  if (ctx.options().quick) return;
  if (!dc::ucx_perftest_built()) {
    std::cerr << "thd-bench datachannel: note: ucx_perftest was not found at build time (install ucx-utils and "
                 "re-run cmake); no ref.ucx_perftest figures\n";
    return;
  }
  const dc::Sizes sizes(false);
  const std::string bw_label = dc::size_label(sizes.bw_bytes);
  if (const auto it = measured.find("dc.ucx.p2p.bw." + bw_label); it != measured.end()) {
    std::vector<dc::UcxPerftestResult> each;
    const auto r = dc::run_ucx_perftest_median(
        {.test = "tag_bw", .bytes = sizes.bw_bytes, .iterations = 50}, ctx.options().reps, &each);
    print_runs(ctx, "ref.ucx_perftest.tag_bw GB/s", each,
               [](const dc::UcxPerftestResult& e) { return e.bandwidth_gbs; });
    ctx.report("ref.ucx_perftest.tag_bw." + bw_label, r.bandwidth_gbs, "GB/s");
    ctx.report("ratio.dc.ucx.p2p.bw.vs_ucx_perftest", it->second / r.bandwidth_gbs, "x");
  }
}

// The libfabric backend's point-to-point figures next to fi_pingpong with the same
// provider: bandwidth >= 0.9x (fi_pingpong's is ping-pong bandwidth).
void run_libfabric_reference(Context& ctx, const std::map<std::string, double>& measured) {
  ctx.begin_group("p2p");
  if (ctx.options().quick) return;
  if (!dc::fi_pingpong_built()) {
    std::cerr << "thd-bench datachannel: note: fi_pingpong was not found at build time (install libfabric-bin "
                 "and re-run cmake); no ref.fi_pingpong figures\n";
    return;
  }
  const dc::Sizes sizes(false);
  const std::string rtt_label = dc::size_label(sizes.rtt_bytes);
  const std::string bw_label = dc::size_label(sizes.bw_bytes);
  if (const auto it = measured.find("dc.libfabric.p2p.rtt." + rtt_label); it != measured.end()) {
    const auto r = dc::run_fi_pingpong(sizes.rtt_bytes, 5000);
    ctx.report("ref.fi_pingpong.rtt." + rtt_label, r.rtt_us, "us");
    ctx.report("ratio.dc.libfabric.p2p.rtt.vs_fi_pingpong", it->second / r.rtt_us, "x");
  }
  if (const auto it = measured.find("dc.libfabric.p2p.bw." + bw_label); it != measured.end()) {
    const auto r = dc::run_fi_pingpong(sizes.bw_bytes, 20);
    ctx.report("ref.fi_pingpong.bw." + bw_label, r.bandwidth_gbs, "GB/s");
    ctx.report("ratio.dc.libfabric.p2p.bw.vs_fi_pingpong", it->second / r.bandwidth_gbs, "x");
  }
}

void run_mpi_reference(Context& ctx, const std::string& backend, int world_size, std::chrono::seconds timeout,
                       const std::map<std::string, double>& measured) {
  ctx.begin_group("allreduce");
  const std::string size = dc::size_label(dc::Sizes::kMpiAllreduceBytes);
  // tcp is compared with Open MPI over TCP on loopback; the backends that move bytes
  // through shared memory (mpi, ucx, libfabric's shm) with Open MPI's shared memory.
  const bool shared_memory = backend != "tcp";
  const std::string ref = shared_memory ? "mpi_sm" : "mpi";
  const std::string ref_name = fmt::format("ref.{}.allreduce.n{}.{}.busbw", ref, world_size, size);
  const std::string dc_name = fmt::format("dc.{}.allreduce.n{}.{}.busbw", backend, world_size, size);
  const std::string ratio_name = fmt::format("ratio.dc.{}.allreduce.n{}.{}.vs_{}", backend, world_size, size, ref);
  if (ctx.options().quick || !(ctx.enabled(ref_name) || ctx.enabled(ratio_name))) return;
  if (!dc::mpi_reference_built()) {
    std::cerr << "thd-bench datachannel: note: Open MPI or its mpirun was not found at build time; no " << ref_name
              << " (install openmpi-bin and libopenmpi-dev and re-run cmake)\n";
    return;
  }
  const double mpi = dc::run_mpi_allreduce({.figure_name = ref_name,
                                            .world_size = world_size,
                                            .bytes = dc::Sizes::kMpiAllreduceBytes,
                                            .reps = ctx.options().reps,
                                            .rep_seconds = ctx.options().rep_seconds,
                                            .timeout = timeout,
                                            .shared_memory = shared_memory});
  ctx.report(ref_name, mpi, "GB/s");
  if (const auto it = measured.find(dc_name); it != measured.end()) ctx.report(ratio_name, it->second / mpi, "x");
}

void launch(Context& ctx) {
  const Options& opt = ctx.options();
  const std::string backend = backend_arg(opt);
  const int world_size = static_cast<int>(integer_arg(opt, "-n", opt.quick ? 2 : 4, 2, kMaxRanks));
  const auto timeout = std::chrono::seconds(
      integer_arg(opt, "--timeout", (opt.quick ? kQuickJobTimeout : kJobTimeout).count(), 1, 86400));

  // Rank 0 applied the filter; its groups' names are part of every figure's name,
  // so the same filter here lets the same lines through.
  ctx.begin_group("");
  std::map<std::string, double> measured;
  std::string mpirun;
  if (backend == "mpi") {
    if (!dc::mpirun_built()) throw std::runtime_error("--backend mpi needs mpirun, which was not found at build time");
    mpirun = dc::mpirun_path();
  }
  dc::launch_ranks({.suite = kSuite, .args = opt.args, .world_size = world_size, .timeout = timeout, .mpirun = mpirun},
                   [&](const std::string& line) {
                     const auto f = parse_figure(line);
                     if (!f) throw std::runtime_error("rank 0 printed a malformed figure line: '" + line + "'");
                     measured[f->name] = f->value;
                     ctx.report(f->name, f->value, f->unit);
                   });
  // After the job, so the references' processes do not compete with ours for the cores.
  if (backend == "ucx") run_ucx_reference(ctx, measured);
  if (backend == "libfabric") run_libfabric_reference(ctx, measured);
  run_mpi_reference(ctx, backend, world_size, timeout, measured);
}

void run_datachannel(Context& ctx) {
  const Options& opt = ctx.options();
  if (!opt.suite_args.contains(dc::kRankFlag)) {
    launch(ctx);
    return;
  }
  dc::RankSettings s;
  s.backend = backend_arg(opt);
  s.world_size = static_cast<int>(integer_arg(opt, dc::kWorldSizeFlag, -1, 2, kMaxRanks));
  s.from_mpi = opt.suite_args.at(dc::kRankFlag) == dc::kRankFromMpi;
  if (!s.from_mpi) {
    s.rank = static_cast<int>(integer_arg(opt, dc::kRankFlag, -1, 0, s.world_size - 1));
    s.master_port = static_cast<uint16_t>(integer_arg(opt, dc::kMasterPortFlag, -1, 1, 65535));
    s.parent_pid = static_cast<pid_t>(integer_arg(opt, dc::kParentPidFlag, -1, 1, INT32_MAX));
  }
  s.timeout = opt.quick ? kQuickRankTimeout : kRankTimeout;
  try {
    dc::run_rank(ctx, s);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("rank {}: {}", s.rank, e.what()));
  }
}

[[maybe_unused]] const bool registered = register_suite({
    kSuite,
    "DataChannel p2p and collectives among local processes, vs plain TCP and MPI",
    run_datachannel,
    {
        {"--backend", "NAME", "the DataChannel backend (default tcp)"},
        {"-n", "N", "ranks to launch (default 4; 2 with --quick)"},
        {"--timeout", "SEC", "deadline of the ranks' job, and of the MPI run (default 600; 60 with --quick)"},
        // Internal: what the launcher passes to the ranks it starts.
        {dc::kRankFlag, "R", ""},
        {dc::kWorldSizeFlag, "N", ""},
        {dc::kMasterPortFlag, "PORT", ""},
        {dc::kParentPidFlag, "PID", ""},
    },
});

}  // namespace
}  // namespace thd::bench
