// The figures of the dispatch suite, measured by the master (this process, with
// the worker behind thd::init_master_worker) and the reference peer together: both
// run the same cases in the same order through one DistTimer, each doing its own
// part (the peer does nothing in the runtime's cases, the worker nothing in the
// plain-socket ones). Sizes shrink under --quick; names say the size used.
//   mw.dispatch.async            1M ops `c = a + b` (16 floats, node 0; 1000 under
//                                --quick), results dropped, issued back to back,
//                                then thd::synchronize()                          ops/s
//   ref.local.ops                the same ops in a plain local loop of thd::Tensor
//                                calls in this process                            ops/s
//   mw.graph.replay.ops          the same ops as a graph of 1000 of them on node 0,
//                                replayed back to back (1000 replays; one under
//                                --quick), then thd::synchronize()                ops/s
//   ratio.mw.graph.replay.local  graph / local rate (target >= 0.7)                 x
//   ratio.mw.graph.replay.eager  graph / mw.dispatch.async rate (target >= 3)       x
//   mw.sync.rtt                  (x + 1).sum().item<float>() on 16 floats, the
//                                median over single round trips                   us
//   ref.tcp.p2p.rtt.8B           8 bytes there and back, plain busy-polled socket,
//                                the median over single round trips               us
//   ratio.mw.sync.rtt            mw / ref time (target <= 3)                        x
//   mw.copy.to_worker.64MiB      dist_send of a 64 MiB tensor; one synchronize()
//                                per timed batch of them                          GB/s
//   mw.copy.from_worker.64MiB    get() of a 64 MiB tensor on node 0                 GB/s
//   ref.tcp.p2p.bw.64MiB         64 MiB over the plain socket, one 1-byte ack per
//                                repetition                                         GB/s
//   ratio.mw.copy.to_worker      mw / ref rate (target >= 0.8)                      x
//   ratio.mw.copy.from_worker    mw / ref rate (target >= 0.8)                      x
// The master also checks each target on stderr (full runs only).
#pragma once

#include <chrono>
#include <memory>

#include <thd/store.h>

#include "bench/harness.h"

namespace thd::bench::mw {

enum class Role { Master, Peer };

// `--ops N`: the ops per timed call of mw.dispatch.async, ref.local.ops and
// mw.graph.replay.ops (default 1M; 1000 under --quick). A small count under a
// profiler (valgrind) makes the per-op cost a difference of two runs.
inline constexpr const char* kOpsFlag = "--ops";

// Which suite's figures: `dispatch` (above), or `streams`:
//   streams.event.cross_node.latency  an event recorded on node 0 while a stream of
//                                node 1 already waits on it, until node 1's stream
//                                has recorded the next event (times from the two
//                                workers' clocks, one host), median                us
//   ref.tcp.p2p.rtt.8B           as above                                          us
//   ratio.streams.event.cross_node  latency / ref round trip (target <= 1)         x
//   streams.one_stream           2 x 2000 in-place adds (16K floats: one core each)
//                                on one stream of node 0, then synchronize         ms
//   streams.two_streams          the same two chains on two streams                ms
//   streams.overlap.ratio        two_streams / one_stream (below 1: they overlap)  x
// or `mw-cuda` (needs a GPU on the worker's machine):
//   mw.cuda.dispatch.async       100K ops `c = a + b` (16 floats on node 0's cuda:0),
//                                issued back to back, then thd::synchronize()     ops/s
//   mw.cuda.copy.to_worker.1GiB  dist_send of 1 GiB to node 0's cuda:0; one
//                                synchronize() per timed batch                    GB/s
//   ref.cuda.h2d.1GiB            the same bytes to a GPU by this process
//                                (Tensor::cuda(): pinned staging)                 GB/s
//   ratio.mw.cuda.copy.to_worker mw / ref rate                                      x
// or `graphs` (three workers, docs/graphs.md):
//   mw.eager.step                a data-parallel step on every node (16x32 @ 32x8
//                                forward, the gradient's matmul, all_reduce of it,
//                                the update), issued eagerly, 100 back to back
//                                (5 under --quick), then synchronize, per step     us
//   mw.graph.step                the same step captured once and replayed          us
//   ratio.mw.graph.step          graph / eager time (target <= 0.5)                 x
enum class FigureSet { Dispatch, Streams, Cuda, Graphs };

struct FigureSettings {
  Role role = Role::Master;
  FigureSet figures = FigureSet::Dispatch;
  // Shared by the master and the peer (Job::store).
  std::shared_ptr<Store> store;
  // Every wait for the other side.
  std::chrono::milliseconds timeout{std::chrono::minutes(2)};
};

// Runs every figure the filter lets through; on the master, reports them through
// ctx. The master must have joined the master-worker job first. Throws on any
// failure, a wrong result included.
void run_figures(Context& ctx, const FigureSettings& settings);

}  // namespace thd::bench::mw
