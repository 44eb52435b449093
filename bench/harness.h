// The thd-bench harness: a registry of benchmark suites and the timing loop they share.
//
// A suite is one .cpp file that registers itself by name (see tensor_bench.cpp):
//   const bool registered = register_suite({"tensor", "dense CPU tensor ops", run_tensor});
// and reports figures through Context::report, which prints one line per figure to
// stdout, "name value unit", e.g. "tensor.add.f32.64MiB 10.52 GB/s". Nothing else goes
// to stdout, so scripts can parse it; diagnostics go to stderr.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace thd::bench {

enum class Statistic { Median, Min };

struct Options {
  // Tiny problem sizes and a single timed call: a smoke test of the suite and of the
  // output format, not a measurement.
  bool quick = false;
  // Run only the figures whose name, or whose group's name, contains this (empty: all).
  std::string filter;
  // Each figure is timed in `reps` repetitions of at least `rep_seconds` each; the
  // statistic over the repetitions is reported.
  int reps = 5;
  double rep_seconds = 0.2;
  Statistic stat = Statistic::Median;
  // Per-repetition timings on stderr.
  bool verbose = false;
  // The values of the chosen suite's own options (Suite::options), by flag, e.g.
  // {"--backend", "tcp"}; a flag given twice keeps the last value.
  std::map<std::string, std::string> suite_args;
  // Every argument after the suite name, as given: for a suite that re-runs this
  // binary in other processes with the same options (the datachannel suite's ranks).
  std::vector<std::string> args;
};

// One timed body, called repeatedly. It must do the whole operation being measured
// (results may be discarded: the ops are out-of-line library calls).
struct Case {
  std::string name;
  std::function<void()> body;
};

class Context {
 public:
  Context(Options options, std::ostream& out, std::ostream& diag);

  const Options& options() const { return options_; }

  // Starts a group of figures that belong together (e.g. "matmul": thd's figure, its
  // reference and their ratio): a filter that matches the group's name keeps all of
  // them, so `--filter matmul` also shows ref.sgemm and ratio.matmul.
  void begin_group(std::string name) { group_ = std::move(name); }
  // Whether a figure of this name (in the current group) passes the filter.
  bool enabled(std::string_view name) const;

  // Seconds per call of each case, in order (NaN for cases the filter skips). After a
  // warm-up call each, the repetitions of all the cases are interleaved (rep 1 of each
  // case, then rep 2 of each, ...) so background load on a shared machine hits the
  // figures that get compared with each other alike.
  std::vector<double> time(const std::vector<Case>& cases);

  // Prints "name value unit" if the filter lets `name` through and value is finite.
  void report(std::string_view name, double value, std::string_view unit);

 private:
  Options options_;
  std::string group_;
  std::ostream& out_;
  std::ostream& diag_;
};

// The statistic of repetitions (or runs): the median (the mean of the middle two
// for an even count) or the minimum. `v` must not be empty.
double statistic_of(std::vector<double> v, Statistic stat);

// A repetition count sized from a short batch, checked: a repetition of `calls`
// is timed (`time` returns seconds per call) and, while it lasts less than half of
// `rep_seconds`, the count grows (at least 4x) and is timed again, a few times at
// most. One slow moment in the sizing batch (a preemption, a page fault, ranks
// leaving a barrier far apart) passes for slow calls, and repetitions sized by it
// alone time little but such moments: seen on this VM, 51 calls a repetition where
// 250000 were due, and a median of 8 us for a 0.4 us round trip. `agree` makes
// every rank of a job take rank 0's count (the identity in one process).
int64_t grow_short_repetition(int64_t calls, double rep_seconds, const std::function<double(int64_t)>& time,
                              const std::function<int64_t(int64_t)>& agree);

// The integer value of suite option `flag`, in lo..hi: `fallback` when it was not
// given (std::invalid_argument when there is none), std::invalid_argument naming the
// flag and the range for anything else.
int64_t suite_integer_arg(const Options& opt, const std::string& flag, std::optional<int64_t> fallback, int64_t lo,
                          int64_t hi);

// An option only one suite takes, e.g. the datachannel suite's `--backend tcp`. Each
// takes one value; main() parses it into Options::suite_args.
struct SuiteOption {
  std::string flag;        // "--backend", "-n"
  std::string value_name;  // "NAME", for --help
  // One line for --help; empty: an internal option that --help does not list.
  std::string help;
};

struct Suite {
  std::string name;
  std::string description;  // one line, for --list
  std::function<void(Context&)> run;
  std::vector<SuiteOption> options = {};
};

// Adds a suite; returns true so it can initialize a namespace-scope constant. Throws
// std::logic_error on a duplicate name.
bool register_suite(Suite suite);
// All registered suites, sorted by name.
std::vector<Suite> suites();

}  // namespace thd::bench
