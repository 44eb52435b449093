// thdrun: starts a thd job's processes on this host and supervises them.
// docs/thdrun.md is the manual; options.h, launch.h and supervisor.h hold the parts.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <thd/error.h>

#include "tools/thdrun/launch.h"
#include "tools/thdrun/options.h"
#include "tools/thdrun/pool_host.h"
#include "tools/thdrun/spawn.h"

namespace {

// Shell conventions: 2 for a command line that cannot be used, 1 for the launcher's
// own failures; the job's status otherwise.
constexpr int kUsageError = 2;
constexpr int kLauncherError = 1;

}  // namespace

int main(int argc, char** argv) {
  using namespace thd::launch;
  ensure_standard_fds();

  const std::vector<std::string> args(argv + 1, argv + argc);
  ParsedArgs parsed;
  try {
    parsed = parse_args(args);
  } catch (const thd::ValueError& e) {
    fmt::print(stderr, "thdrun: {}\n{}\nRun 'thdrun --help' for the options.\n", e.message(), usage_line());
    return kUsageError;
  }

  switch (parsed.action) {
    case Action::Help:
      fmt::print("{}", help_text());
      return 0;
    case Action::Version:
      fmt::print("{}\n", version_text());
      return 0;
    case Action::Run:
      break;
  }

  try {
    // Every process thdrun starts inherits it (ranks, pool workers, the pool's master).
    if (parsed.options.backend) ::setenv("THD_BACKEND", parsed.options.backend->c_str(), 1);
    return parsed.options.pool ? run_pool(parsed.options) : run_local_job(parsed.options);
  } catch (const ExecError& e) {
    fmt::print(stderr, "thdrun: {}\n", e.message());
    return e.exit_code();
  } catch (const thd::Error& e) {
    fmt::print(stderr, "thdrun: {}\n", e.message());
    return kLauncherError;
  } catch (const std::exception& e) {
    fmt::print(stderr, "thdrun: {}\n", e.what());
    return kLauncherError;
  }
}
