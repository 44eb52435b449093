#include "tools/thdrun/rank_env.h"

#include <algorithm>
#include <string_view>
#include <utility>

extern char** environ;

namespace thd::launch {
namespace {

bool has_name(std::string_view entry, std::string_view name) {
  return entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=';
}

}  // namespace

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

std::optional<std::string> find_variable(const std::vector<std::string>& env, const std::string& name) {
  for (const std::string& entry : env) {
    if (has_name(entry, name)) return entry.substr(name.size() + 1);
  }
  return std::nullopt;
}

bool has_auth_token(const std::vector<std::string>& env) {
  return find_variable(env, "THD_AUTH_TOKEN").has_value() || find_variable(env, "THD_AUTH_TOKEN_FILE").has_value();
}

std::vector<std::string> rank_environment(const std::vector<std::string>& base, const JobEnv& job, int local_rank) {
  std::vector<std::pair<std::string, std::string>> set = {
      {"RANK", std::to_string(job.first_rank + local_rank)},
      {"WORLD_SIZE", std::to_string(job.world_size)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(job.local_world_size)},
      {"MASTER_ADDR", job.master_addr},
      {"MASTER_PORT", std::to_string(job.master_port)},
  };
  if (job.token_file) set.emplace_back("THD_AUTH_TOKEN_FILE", *job.token_file);
  if (job.job_mode_file) set.emplace_back("THD_JOB_MODE_FILE", *job.job_mode_file);
  // Debian's libfabric loads the PSM driver (libinfinipath), whose load-time
  // constructor catches SIGTERM, SIGINT and the crash signals unless this is set.
  // thd's library puts them back when it loads (datachannel/
  // library_signal_handlers.cpp), but a rank that thdrun stops while it is still
  // loading its libraries got SIGTERM in between and never died of it (CI: the
  // rank outlived the 5 s grace period). Set unless the user set it.
  if (!find_variable(base, "IPATH_NO_BACKTRACE")) set.emplace_back("IPATH_NO_BACKTRACE", "1");

  std::vector<std::string> env;
  env.reserve(base.size() + set.size());
  for (const std::string& entry : base) {
    const bool replaced =
        std::any_of(set.begin(), set.end(), [&](const auto& kv) { return has_name(entry, kv.first); });
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

}  // namespace thd::launch
