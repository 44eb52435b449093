// thd-worker's command line (docs/worker_pool.md). Parsing only; main.cpp acts on
// the result through worker::serve_pool().
#pragma once

#include <span>
#include <string>

#include "worker/pool.h"

namespace thd::worker_cli {

enum class Action { Serve, Help, Version };

struct ParsedArgs {
  Action action = Action::Serve;
  worker::PoolOptions pool;  // meaningful for Action::Serve only
};

// Parses the arguments after argv[0]. Throws thd::ValueError naming the argument
// that is wrong and why. The token is never an argument (command lines are
// visible to every user): it comes from THD_AUTH_TOKEN or THD_AUTH_TOKEN_FILE.
ParsedArgs parse_args(std::span<const std::string> args);

std::string usage_line();
std::string help_text();
std::string version_text();

}  // namespace thd::worker_cli
