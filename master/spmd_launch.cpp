#include "master/spmd_launch.h"

#include <mutex>
#include <string>

#include "datachannel/backend_choice.h"
#include "tensor/check.h"

namespace thd::master {

namespace {

// The launcher of the first session this process mastered through one; empty
// while there was none. A process belongs to one launch for its whole life.
struct Ended {
  std::mutex mu;
  std::string launcher;
};

Ended& ended() {
  static Ended e;
  return e;
}

}  // namespace

void check_launch_has_workers(const RendezvousOptions& rv) {
  const std::string_view launcher = detail::rendezvous_launcher(rv);
  if (launcher.empty()) return;
  std::string started;
  {
    std::lock_guard lock(ended().mu);
    started = ended().launcher;
  }
  if (started.empty()) return;
  THD_THROW(ValueError, "init_master_worker",
            "this process was started by {} and its master-worker session has ended: the launch's other ranks were "
            "its workers, and they exited at shutdown, so there are none for a new session. Keep one session for "
            "the whole program, or start workers that outlive sessions (thdrun --pool, or thd-worker processes) and "
            "attach with init_method tcp://host:port",
            started);
}

void note_session_started(const RendezvousOptions& rv) {
  const std::string_view launcher = detail::rendezvous_launcher(rv);
  if (launcher.empty()) return;
  std::lock_guard lock(ended().mu);
  if (ended().launcher.empty()) ended().launcher = std::string(launcher);
}

}  // namespace thd::master
