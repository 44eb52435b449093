// Runs the thdrun binary from a test: its output captured, a deadline after which
// it is killed, and a hunt for processes it left behind. The test process is made a
// child subreaper, so a rank thdrun orphans is re-parented here and found.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace thd::test {

// Built next to the tests (see CMakeLists.txt).
std::string thdrun_path();
std::string probe_path();

struct ThdrunRun {
  std::vector<std::string> args = {};  // after "thdrun"
  // Changes to this process's environment for thdrun: a value sets the variable,
  // nullopt removes it. THD_AUTH_TOKEN and THD_AUTH_TOKEN_FILE are removed first,
  // so an outer job's token never leaks into a test, and TMPDIR is a fresh
  // directory of the run's own (see ThdrunResult::tmpdir).
  std::vector<std::pair<std::string, std::optional<std::string>>> env = {};
  std::chrono::milliseconds timeout{15000};
  // thdrun's stdin: this text through a pipe; /dev/null when unset.
  std::optional<std::string> stdin_text = std::nullopt;
  // Called with each complete line thdrun writes (stream 1 or 2) while it runs, and
  // thdrun's pid: where a test sends its signals.
  std::function<void(int stream, const std::string& line, pid_t thdrun)> on_line = {};
  // How long processes found orphaned after thdrun exits may take to die on their
  // own before the runner kills them (the PDEATHSIG test waits for them).
  std::chrono::milliseconds orphan_grace{0};
};

// A process that was a child of thdrun and outlived it.
struct Leftover {
  pid_t pid = -1;
  bool killed_by_runner = false;  // still alive after orphan_grace
  int wait_status = 0;
};

struct ThdrunResult {
  int status = -1;  // exit code, 128 + signal if killed, -1 if it ran past the timeout
  bool timed_out = false;
  std::string out, err;
  std::chrono::milliseconds elapsed{};
  std::vector<Leftover> leftovers;
  // thdrun's TMPDIR, where its token directory goes, and what was left in it when
  // thdrun had exited; the runner removes it afterwards.
  std::string tmpdir;
  std::vector<std::string> tmpdir_leftovers;

  std::vector<std::string> out_lines() const;
};

ThdrunResult run_thdrun(const ThdrunRun& run);

// "thdrun failed with ...: <stderr>" for assertion messages.
std::string describe(const ThdrunResult& r);

// run_thdrun, plus the checks every test makes whatever else it checks: thdrun
// ended within its deadline, no process outlived it, its token directory is gone.
ThdrunResult run_thdrun_checked(const ThdrunRun& run);

// thdrun's arguments, then the probe and its steps.
ThdrunRun probe_run(std::vector<std::string> thdrun_args, const std::vector<std::string>& steps);

}  // namespace thd::test
