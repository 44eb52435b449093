// The environment each rank starts with: the launcher's own, plus the variables
// that env:// rendezvous (datachannel/store/rendezvous.cpp) and the auth token
// lookup (datachannel/net/auth.cpp) read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace thd::launch {

// What every rank of one job shares.
struct JobEnv {
  std::string master_addr;
  uint16_t master_port = 0;
  int world_size = 0;
  // Ranks on this host, and the global rank of the first of them. One host today:
  // first_rank is 0 and local_world_size == world_size; a multi-host launch
  // (--nnodes/--node-rank) fills them in per host.
  int local_world_size = 0;
  int first_rank = 0;
  // THD_AUTH_TOKEN_FILE for the ranks; nullopt leaves the inherited token settings alone.
  std::optional<std::string> token_file;
  // THD_JOB_MODE_FILE for the ranks (master/job_mode.h); nullopt: not set.
  std::optional<std::string> job_mode_file;
};

// This process's environment as NAME=value strings.
std::vector<std::string> current_environment();

// The value of `name` in `env`, nullopt when it is not there.
std::optional<std::string> find_variable(const std::vector<std::string>& env, const std::string& name);

// True when `env` already carries a token (THD_AUTH_TOKEN or THD_AUTH_TOKEN_FILE):
// the launcher then keeps it, so every rank of a job started by hand or by an outer
// launcher proves the same secret.
bool has_auth_token(const std::vector<std::string>& env);

// `base` with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT (and THD_AUTH_TOKEN_FILE, THD_JOB_MODE_FILE when set in `job`) replaced by this
// rank's values; every other variable is kept in order.
std::vector<std::string> rank_environment(const std::vector<std::string>& base, const JobEnv& job, int local_rank);

}  // namespace thd::launch
