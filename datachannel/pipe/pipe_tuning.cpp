#include "datachannel/pipe/pipe_tuning.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <string>

#include "datachannel/check.h"
#include "datachannel/pipe/yield_backoff.h"
#include "datachannel/spin_policy.h"
#include "datachannel/transport_options.h"
#include "tensor/env_setting.h"

namespace thd::detail::pipe {

namespace {

// The variable `name` as a whole number in [min, max] of `unit`, nullopt when it is
// unset or empty; ValueError naming it otherwise.
std::optional<uint64_t> env_number(const net::EnvLookup& env, const char* name, uint64_t min, uint64_t max,
                                   const char* unit) {
  return parse_whole_number({.name = name, .min = min, .max = max, .unit = unit}, env(name), "DataChannel::create");
}

// The on/off variable `name`: "1" on, "0" off, nullopt when it is unset or empty;
// ValueError naming it otherwise.
std::optional<bool> env_switch(const net::EnvLookup& env, const char* name) {
  const auto v = env(name);
  if (!v || v->empty()) return std::nullopt;
  THD_CHECK(*v == "0" || *v == "1", ValueError, "DataChannel::create", "{} must be 0 (off) or 1 (on), got '{}'", name,
            *v);
  return *v == "1";
}

}  // namespace

PipeTuning pipe_tuning_from_env(const net::EnvLookup& env) {
  PipeTuning t;
  t.unexpected_limit = max_unexpected_bytes("DataChannel::create", t.unexpected_limit, env);
  if (auto us = env_number(env, "THD_PIPE_SPIN_US", 0, 1000000, "microseconds")) {
    t.spin_budget = std::chrono::microseconds(*us);
  }
  if (auto ms = env_number(env, "THD_PIPE_HEARTBEAT_TIMEOUT_MS", 100, 3600000, "milliseconds")) {
    t.heartbeat_timeout = std::chrono::milliseconds(*ms);
    t.heartbeat_interval = std::min(t.heartbeat_interval, t.heartbeat_timeout / 4);
  }
  if (auto on = env_switch(env, "THD_PIPE_NATIVE_MATCHING")) t.native_matching = *on;
  if (auto on = env_switch(env, "THD_PIPE_DIRECT")) t.direct_path = *on;
  if (auto ns = env_number(env, "THD_PIPE_YIELD_SWITCH_NS", 1, 1000000, "nanoseconds")) {
    t.yield_switch = std::chrono::nanoseconds(*ns);
  }
  return t;
}

namespace {

// Ranks of this job on this host: the launcher's count (thdrun, Open MPI, MPICH),
// else the whole world when it listens on loopback (one host), else unknown (1).
// A count that is set but not a positive whole number is a ValueError naming it.
int local_ranks(const DataChannelOptions& options) {
  for (const char* name : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    const WholeNumberSetting count{.name = name, .min = 1, .max = INT_MAX};
    if (auto n = parse_whole_number(count, net::process_env(name), "DataChannel::create")) return static_cast<int>(*n);
  }
  const std::string& host = options.bind_host;
  const bool loopback = host.starts_with("127.") || host == "localhost" || host == "::1" || host == "[::1]";
  return loopback ? options.world_size : 1;
}

}  // namespace

PipeTuning pipe_tuning_for(const DataChannelOptions& options) {
  PipeTuning tuning = pipe_tuning_from_env();
  // More ranks on this host than cores: a waiter that spins hard takes the core the
  // rank it waits for needs (4 ranks on 2 cores: all_reduce 3x slower), and one that
  // blocks at once pays two thread wake-ups a message. It spins as long, but yields
  // the core every round, as Open MPI does when oversubscribed.
  if (local_ranks(options) > detail::usable_cpus()) {
    tuning.yield_while_spinning = true;
    const auto given = net::process_env("THD_PIPE_YIELD_SWITCH_NS");
    if (!given || given->empty()) tuning.yield_switch = measure_yield_switch();
  }
  return tuning;
}

}  // namespace thd::detail::pipe
