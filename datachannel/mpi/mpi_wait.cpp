#include "datachannel/mpi/mpi_wait.h"

#include <sched.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "datachannel/check.h"
#include "datachannel/mpi/mpi_library.h"

namespace thd::detail::mpi {

namespace {

constexpr std::chrono::microseconds kSpin{200};
constexpr std::chrono::milliseconds kYield{10};
constexpr std::chrono::microseconds kNap{200};

// Buffers of calls given up on: MPI may still write them while the process runs.
void keep_for_process_life(std::shared_ptr<const void> buffers) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::shared_ptr<const void>>();  // outlives static destructors
  std::lock_guard lock(mu);
  kept->push_back(std::move(buffers));
}

}  // namespace

void wait_within(MPI_Request& request, net::Deadline deadline, std::chrono::milliseconds timeout, std::string_view op,
                 std::string_view call, std::shared_ptr<const void> buffers) {
  const auto start = net::Clock::now();
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), op, "MPI_Test");
    if (done) return;
    const auto now = net::Clock::now();
    if (now >= deadline) break;
    if (now - start < kSpin) continue;
    if (now - start < kYield) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(kNap);
    }
  }
  keep_for_process_life(std::move(buffers));
  THD_THROW(TimeoutError, std::string(op),
            "{} did not complete within the timeout of {} ms: some rank of MPI_COMM_WORLD never joined (it exited, "
            "is in MPI_Finalize, or is running something else)",
            call, timeout.count());
}

}  // namespace thd::detail::mpi
