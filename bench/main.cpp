// thd-bench: runs one benchmark suite and prints its figures, "name value unit" per line.
//
//   thd-bench --list
//   thd-bench <suite> [--filter TEXT] [--quick] [--reps N] [--min-time SECONDS]
//                     [--stat median|min] [--verbose] [suite options]
#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>

#include "bench/harness.h"

namespace {

using thd::bench::Options;
using thd::bench::Statistic;

constexpr int kUsageError = 2;

std::string suite_names() {
  std::string s;
  for (const auto& suite : thd::bench::suites()) s += (s.empty() ? "" : ", ") + suite.name;
  return s;
}

void print_usage(std::ostream& os) {
  os << "usage: thd-bench --list\n"
        "       thd-bench <suite> [options]\n"
        "\n"
        "Prints one line per figure: \"name value unit\".\n"
        "\n"
        "options:\n"
        "  --filter TEXT      only the figures whose name contains TEXT\n"
        "  --quick            tiny sizes, one timed call each (a smoke test, not a measurement)\n"
        "  --reps N           repetitions per figure (default 5)\n"
        "  --min-time SEC     minimum duration of one repetition (default 0.2)\n"
        "  --stat median|min  statistic over the repetitions (default median)\n"
        "  --verbose          per-repetition timings on stderr\n";
  for (const auto& suite : thd::bench::suites()) {
    bool heading = false;
    for (const auto& option : suite.options) {
      if (option.help.empty()) continue;  // internal
      if (!heading) os << "\n" << suite.name << " options:\n";
      heading = true;
      os << fmt::format("  {:<18} {}\n", option.flag + " " + option.value_name, option.help);
    }
  }
  os << "\n"
        "suites: "
     << suite_names() << "\n";
}

const thd::bench::SuiteOption* find_option(const thd::bench::Suite& suite, std::string_view flag) {
  for (const auto& option : suite.options) {
    if (option.flag == flag) return &option;
  }
  return nullptr;
}

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "thd-bench: " << msg << "\n(run thd-bench --help for usage)\n";
  std::exit(kUsageError);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(std::cerr);
    return kUsageError;
  }
  const std::string first = argv[1];
  if (first == "--help" || first == "-h") {
    print_usage(std::cout);
    return 0;
  }
  if (first == "--list") {
    for (const auto& suite : thd::bench::suites()) {
      std::cout << fmt::format("{:<14} {}\n", suite.name, suite.description);
    }
    return 0;
  }

  const thd::bench::Suite* chosen = nullptr;
  const auto all = thd::bench::suites();
  for (const auto& suite : all) {
    if (suite.name == first) chosen = &suite;
  }
  if (chosen == nullptr) {
    usage_error("unknown suite '" + first + "'; available suites: " + suite_names());
  }

  Options opt;
  opt.args.assign(argv + 2, argv + argc);
  for (int i = 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(std::string(arg) + " needs a value");
      return argv[++i];
    };
    try {
      if (arg == "--quick") {
        opt.quick = true;
      } else if (arg == "--verbose") {
        opt.verbose = true;
      } else if (arg == "--filter") {
        opt.filter = value();
      } else if (arg == "--reps") {
        opt.reps = std::stoi(value());
        if (opt.reps < 1) usage_error("--reps must be at least 1");
      } else if (arg == "--min-time") {
        opt.rep_seconds = std::stod(value());
        if (!(opt.rep_seconds > 0)) usage_error("--min-time must be positive");
      } else if (arg == "--stat") {
        const std::string s = value();
        if (s == "median") {
          opt.stat = Statistic::Median;
        } else if (s == "min") {
          opt.stat = Statistic::Min;
        } else {
          usage_error("--stat must be median or min, got '" + s + "'");
        }
      } else if (find_option(*chosen, arg) != nullptr) {
        opt.suite_args[std::string(arg)] = value();
      } else {
        usage_error("unknown option '" + std::string(arg) + "' for suite " + chosen->name);
      }
    } catch (const std::logic_error&) {  // stoi / stod on a non-number
      usage_error("bad value for " + std::string(argv[i - 1]) + ": '" + argv[i] + "'");
    }
  }

  try {
    thd::bench::Context ctx(opt, std::cout, std::cerr);
    chosen->run(ctx);
  } catch (const std::exception& e) {
    std::cerr << "thd-bench " << chosen->name << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
