// The progress engine of the async collectives: every group's and tag's collectives
// of this process advance as tasks on a fixed number of threads (lanes;
// THD_COLLECTIVE_THREADS, default 1), however many groups and tags have some in
// flight.
//
// A task is a collective's algorithm, plain blocking code over Comm, run on a fiber
// (fiber.h): where it waits for a message (Comm::wait) it suspends, its step kept on
// its stack, and its lane runs other tasks until that message's request finishes
// (the request tells the lane: RequestState::on_finish) or the wait's time is up.
// A lane with nothing runnable first drives the transport for a moment for its
// newest waiter (a small collective's next message is then taken off the socket
// by the lane itself), then sleeps.
// So a lane never blocks on the network for one task while another could go on,
// and collectives of different tags cannot deadlock across ranks over a lane.
// An idle lane sleeps on a condition variable: no polling.
//
// The order of a (group, tag)'s collectives is CollectiveQueue's: it hands the
// engine one task at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "datachannel/net/socket.h"
#include "datachannel/request_state.h"

namespace thd::detail {

class CollectiveEngine {
 public:
  using Task = std::function<void()>;  // must not throw: it reports through its request
  using Done = std::function<void()>;  // must not throw

  // The engine of this process; its lanes start with their first task. ValueError
  // when THD_COLLECTIVE_THREADS is not a whole number from 1 to kMaxThreads.
  static CollectiveEngine& instance();
  static constexpr int kMaxThreads = 64;

  int threads() const noexcept;
  // The lane for a new (group, tag) queue: its tasks all run there, one after the
  // other. Round-robin over the lanes.
  int pick_lane() noexcept;
  // Starts `task` on `lane`; `done` runs on the lane's thread once it has finished.
  void start(int lane, Task task, Done done);

  // Whether this thread is running an engine task (a fiber of a lane).
  static bool on_task() noexcept;
  // What a request made by the running task sets as its RequestState::on_finish,
  // so that finishing it resumes the task: its lane, from 1; 0 off a task.
  static uint32_t finish_lane() noexcept;
  // From a task: suspends it until `request` finished or `until` passed (the lane
  // runs other tasks meanwhile); true if finished.
  static bool await(RequestState& request, net::Deadline until);
  // Waits `duration` without holding the thread: on a task, the lane runs other
  // tasks meanwhile; elsewhere the thread sleeps.
  static void pause(std::chrono::microseconds duration);

  struct Lane;

 private:
  explicit CollectiveEngine(int threads);

  friend void collective_lane_request_finished(uint32_t lane) noexcept;

  Lane* lanes_;
  int count_;
  std::atomic<unsigned> next_lane_{0};
};

// THD_COLLECTIVE_THREADS read from `value` (unset or empty: 1); ValueError naming the
// variable and the range otherwise.
int collective_threads_from(const std::optional<std::string>& value);

}  // namespace thd::detail
