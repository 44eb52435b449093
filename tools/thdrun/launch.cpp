#include "tools/thdrun/launch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <system_error>

#include "tensor/check.h"
#include "tools/thdrun/fd.h"
#include "tools/thdrun/free_port.h"
#include "tools/thdrun/process_watch.h"
#include "tools/thdrun/rank_env.h"
#include "tools/thdrun/signals.h"
#include "tools/thdrun/spawn.h"
#include "tools/thdrun/supervisor.h"
#include "tools/thdrun/token_dir.h"

namespace thd::launch {
namespace {

constexpr const char* kOp = "thdrun";

}  // namespace

void ensure_standard_fds() noexcept {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      // open() returns the lowest free descriptor, which is `fd`.
      const int opened = ::open("/dev/null", O_RDWR);
      if (opened >= 0 && opened != fd) ::close(opened);
    }
  }
}

int run_local_job(const LaunchOptions& options) {
  // Declared in the order they must be torn down in reverse: the ranks are killed
  // (supervisor) before the token directory goes, and the signal handlers are put
  // back last.
  SignalEvents signals;

  const std::vector<std::string> base_env = current_environment();
  // A job that inherits its token still gets a private directory, for the job mode.
  const TokenDir run_dir = TokenDir::create(!has_auth_token(base_env));

  JobEnv job;
  job.master_addr = options.master_addr;
  job.master_port = options.master_port ? *options.master_port : pick_free_port(options.master_addr);
  job.world_size = options.nproc;
  job.local_world_size = options.nproc;
  job.first_rank = 0;
  if (!run_dir.file().empty()) job.token_file = run_dir.file();
  job.job_mode_file = run_dir.job_mode_file();

  // The ranks run in their own process groups, which a terminal does not let read
  // (SIGTTIN would stop them): rank 0 reads thdrun's stdin only when it is a file
  // or a pipe; every other rank reads /dev/null.
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  THD_CHECK(dev_null.valid(), Error, kOp, "cannot open /dev/null: {}", std::system_category().message(errno));
  const bool rank0_reads_stdin = ::isatty(STDIN_FILENO) == 0;

  Supervisor supervisor(signals, SupervisorOptions{.kill_grace = options.kill_grace,
                                                  .on_rank_failure = options.on_rank_failure,
                                                  .job_mode_file = *job.job_mode_file});
  for (int rank = 0; rank < options.nproc; ++rank) {
    ProcessSpec spec;
    spec.argv = options.command;
    spec.env = rank_environment(base_env, job, rank);
    spec.stdin_fd = rank == 0 && rank0_reads_stdin ? -1 : dev_null.get();

    std::optional<std::string> tag;
    if (options.tag_output) tag = fmt::format("[rank {}] ", job.first_rank + rank);
    supervisor.add(job.first_rank + rank, start_watched(std::move(spec), signals, tag));
  }
  return supervisor.wait();
}

}  // namespace thd::launch
