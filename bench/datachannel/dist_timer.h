// The timing loop of the harness (Context::time), run by every rank of a job at once.
//
// Each rank times its own part of an operation; they must agree on how many calls
// a repetition makes, and a repetition's time is that of the slowest rank (for a
// collective, the whole operation is done only when every rank is). The control
// traffic (a barrier before each repetition, rank 0 collecting the times and
// deciding the call counts) goes through the job's store, outside the timed region.
//
// Every rank must call time() with the same cases in the same order, under the same
// Options: the filter then skips the same cases everywhere.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include <thd/store.h>

#include "bench/harness.h"

namespace thd::bench::dc {

struct DistCase {
  std::string name;
  // Makes `calls` calls of the operation on this rank; returns when this rank's
  // part of the last one is done. Ranks that take no part do nothing.
  std::function<void(int64_t calls)> run;
  // Instead of `run`: a reference the ranks do not time themselves (a program's
  // own figure, such as ucx_perftest's), in seconds per call. Rank 0 calls it once
  // a repetition, in the case's turn, while the other ranks wait at the next
  // case's barrier (in the store, without spinning); never under --quick.
  std::function<double()> measure = nullptr;
};

class DistTimer {
 public:
  DistTimer(std::shared_ptr<Store> store, int rank, int world_size, Options options, std::ostream& diag);

  // Seconds per call of each case on rank 0 (NaN for cases the filter skips, and on
  // every other rank). As Context::time: a warm-up call, timed batches to size the
  // repetitions (>= Options::rep_seconds each), then the repetitions of all cases
  // interleaved, and the median (or min) of them; under --quick, one timed call.
  // A measured case (DistCase::measure) takes its turn in every repetition.
  std::vector<double> time(const Context& ctx, const std::vector<DistCase>& cases);

  // The median over the last time() call's repetitions of case a's time divided by
  // case b's in the same repetition, on rank 0 (NaN on other ranks, under --quick,
  // or where either case was not timed). Taken repetition by repetition, the ratio
  // compares the two under the same conditions even where the machine changes speed
  // between repetitions, as this VM does within seconds.
  double paired_ratio(size_t a, size_t b) const;

  // Returns once every rank has called it.
  void barrier();

 private:
  // The slowest rank's value, on rank 0 (this rank's own elsewhere).
  double slowest(double mine);
  // Rank 0's `value` on every rank.
  int64_t from_rank0(int64_t value);
  // How many calls make a repetition of at least Options::rep_seconds (checked
  // with grow_short_repetition, harness.h).
  int64_t size_repetition(const DistCase& c);
  // Seconds per call of `calls` calls of `c`, every rank starting together.
  double time_calls(const DistCase& c, int64_t calls);
  std::string next_key(const char* what);

  std::shared_ptr<Store> store_;
  int rank_;
  int world_size_;
  Options options_;
  std::ostream& diag_;
  int64_t sequence_ = 0;
  std::vector<std::vector<double>> last_samples_;  // by case: the last time() call's repetitions
};

}  // namespace thd::bench::dc
