#include "bench/datachannel/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "bench/datachannel/process.h"

namespace thd::bench::dc {
namespace {

using Clock = std::chrono::steady_clock;

// Rank 0 last: it hosts the store, and the others would report losing it.
void kill_all(std::vector<ChildProcess>& ranks) {
  for (auto it = ranks.rbegin(); it != ranks.rend(); ++it) it->kill();
}

std::string running_ranks(std::vector<ChildProcess>& ranks) {
  std::string s;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!ranks[r].poll()) s += (s.empty() ? "" : ", ") + std::to_string(r);
  }
  return s;
}

}  // namespace

void launch_ranks(const LaunchOptions& options, const std::function<void(const std::string&)>& on_line) {
  const std::string exe = self_executable();
  const uint16_t port = free_loopback_port();
  // The token goes to the ranks through their environment only: it never shows in
  // a command line (ps) or a file. A token file from our own environment would only
  // compete with it.
  const std::vector<std::string> env =
      environment_with({"THD_AUTH_TOKEN=" + random_token()}, {"THD_AUTH_TOKEN_FILE"});
  Pipe figures = Pipe::create();

  std::vector<ChildProcess> ranks;  // killed and reaped on every path out
  ranks.reserve(static_cast<size_t>(options.world_size));
  if (!options.mpirun.empty()) {
    // One mpirun for the whole job; its ranks' stdout is the figure pipe (ranks
    // other than 0 send theirs to stderr themselves).
    ChildProcess::Spec spec;
    spec.program = options.mpirun;
    // argv[0] is the bare name: Open MPI derives its prefix from an absolute one.
    // More ranks than cores is allowed through the environment, which MPICH's
    // launcher ignores, not with Open MPI's --oversubscribe, which it refuses.
    spec.argv = {"mpirun", "-n", std::to_string(options.world_size), exe, options.suite};
    spec.argv.insert(spec.argv.end(), options.args.begin(), options.args.end());
    for (const auto& [flag, value] : {std::pair{kRankFlag, std::string(kRankFromMpi)},
                                      std::pair{kWorldSizeFlag, std::to_string(options.world_size)}}) {
      spec.argv.push_back(flag);
      spec.argv.push_back(value);
    }
    std::vector<std::string> set = {"THD_AUTH_TOKEN=" + random_token(), "OMPI_MCA_rmaps_base_oversubscribe=1"};
    if (::geteuid() == 0) {
      set.push_back("OMPI_ALLOW_RUN_AS_ROOT=1");
      set.push_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
    }
    spec.env = environment_with(set, {"THD_AUTH_TOKEN_FILE"});
    spec.stdout_fd = figures.write.get();
    spec.own_process_group = true;  // so a kill reaches the ranks too
    ranks.push_back(ChildProcess::spawn(spec));
  }
  for (int r = 0; options.mpirun.empty() && r < options.world_size; ++r) {
    ChildProcess::Spec spec;
    spec.program = exe;
    spec.argv = {exe, options.suite};
    spec.argv.insert(spec.argv.end(), options.args.begin(), options.args.end());
    for (const auto& [flag, value] : {std::pair{kRankFlag, std::to_string(r)},
                                      std::pair{kWorldSizeFlag, std::to_string(options.world_size)},
                                      std::pair{kMasterPortFlag, std::to_string(port)},
                                      std::pair{kParentPidFlag, std::to_string(::getpid())}}) {
      spec.argv.push_back(flag);
      spec.argv.push_back(value);
    }
    spec.env = env;
    // Only rank 0 prints figures; anything another rank writes to stdout must not
    // mix with them.
    spec.stdout_fd = r == 0 ? figures.write.get() : STDERR_FILENO;
    ranks.push_back(ChildProcess::spawn(spec));
  }
  // Rank 0 holds the only write end now: the pipe ends when it exits.
  figures.write.reset();
  LineReader reader(std::move(figures.read));

  const auto deadline = Clock::now() + options.timeout;
  size_t finished = 0;
  while (finished < ranks.size() || !reader.at_eof()) {
    for (const auto& line : reader.read(std::chrono::milliseconds(20))) on_line(line);
    finished = 0;
    for (size_t r = 0; r < ranks.size(); ++r) {
      const auto status = ranks[r].poll();
      if (!status) continue;
      if (!status->ok()) {
        kill_all(ranks);
        throw std::runtime_error(fmt::format("rank {} of {} {}", r, ranks.size(), status->describe()));
      }
      ++finished;
    }
    if (Clock::now() >= deadline) {
      const std::string running = running_ranks(ranks);
      kill_all(ranks);
      throw std::runtime_error(fmt::format("the job timed out after {} s; rank(s) {} still running",
                                           std::chrono::duration_cast<std::chrono::seconds>(options.timeout).count(),
                                           running.empty() ? "none" : running));
    }
  }
}

}  // namespace thd::bench::dc
