#include "worker_job.h"

#include <signal.h>
#include <unistd.h>

#include <stdexcept>

#include "roles.h"
#include "test_util.h"

namespace thd::test {

std::string self_path() {
  char path[4096];
  const ssize_t len = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (len <= 0) throw std::runtime_error("readlink /proc/self/exe failed");
  return std::string(path, static_cast<size_t>(len));
}

WorkerJob::WorkerJob(JobOptions options) : options_(std::move(options)) {
  // free_port() cannot reserve the port: another process may take it before the
  // master binds it, so a failed bind gets a second and a third port. A job with
  // a short timeout (the stall tests) may also time out at rendezvous on a loaded
  // machine, before a worker process is even up: that is retried too.
  for (int attempt = 1;; ++attempt) {
    try {
      start(free_port());
      return;
    } catch (const ConnectionError&) {
      procs_.clear();  // killed and reaped
      if (attempt == 3) throw;
    } catch (const TimeoutError&) {
      procs_.clear();
      if (attempt == 3) throw;
    }
  }
}

void WorkerJob::start(uint16_t port) {
  const int world_size = options_.workers + 1;
  const milliseconds worker_timeout =
      options_.worker_timeout.count() > 0 ? options_.worker_timeout : options_.timeout;
  for (int node = 0; node < options_.workers; ++node) {
    EnvChanges env = {{"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", std::to_string(port)},
                      {"RANK", std::to_string(node + 1)},
                      {"WORLD_SIZE", std::to_string(world_size)},
                      {"THD_AUTH_TOKEN", kToken},
                      {"THD_BACKEND", "tcp"},
                      {"THD_HARDENING_TIMEOUT_MS", std::to_string(worker_timeout.count())},
                      {"THD_TEST_HOOKS", options_.test_hooks ? std::optional<std::string>("1") : std::nullopt}};
    procs_.push_back(std::make_unique<TestProcess>(std::vector<std::string>{self_path(), kWorkerRole}, env));
  }
  MasterWorkerOptions o = options_.master;
  o.backend = "tcp";
  o.init_method = "tcp://127.0.0.1:" + std::to_string(port);
  o.world_size = world_size;
  o.rank = 0;
  o.timeout = options_.timeout;
  o.token = std::string(kToken);
  init_master_worker(o);
}

WorkerJob::~WorkerJob() { stop(); }

pid_t WorkerJob::pid(int node) const { return procs_.at(static_cast<size_t>(node))->pid(); }

void WorkerJob::signal(int node, int sig) const { procs_.at(static_cast<size_t>(node))->signal(sig); }

Clock::time_point WorkerJob::kill(int node) {
  TestProcess& p = *procs_.at(static_cast<size_t>(node));
  p.signal(SIGKILL);
  const auto killed = Clock::now();
  p.wait(kExitGrace);
  return killed;
}

std::string WorkerJob::output(int node) const { return procs_.at(static_cast<size_t>(node))->output(); }

const JobEnd& WorkerJob::stop() {
  if (stopped_) return end_;
  stopped_ = true;
  for (auto& p : procs_) p->signal(SIGCONT);
  const auto start = Clock::now();
  try {
    shutdown();
  } catch (...) {
    end_.shutdown_error = std::current_exception();
  }
  end_.shutdown_took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  const auto deadline = Clock::now() + kExitGrace;
  for (auto& p : procs_) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    const int code = p->wait(std::max(left, milliseconds(1)));
    if (code == -1) p->signal(SIGKILL);
    end_.exit_codes.push_back(code);
  }
  return end_;
}

}  // namespace thd::test
