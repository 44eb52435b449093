#include "bench/datachannel/client_server_run.h"

#include <unistd.h>

#include <fmt/format.h>

#include <stdexcept>
#include <thread>

#include "bench/datachannel/process.h"

namespace thd::bench::dc {

void run_client_server(const ClientServerRun& run, const std::function<bool(const std::string&)>& take_line) {
  using Clock = std::chrono::steady_clock;
  const std::vector<std::string> env = environment_with({}, {});
  const std::string name = run.program.substr(run.program.find_last_of('/') + 1);

  ChildProcess::Spec server_spec;
  server_spec.program = run.program;
  server_spec.argv = {run.program};
  server_spec.argv.insert(server_spec.argv.end(), run.server.begin(), run.server.end());
  server_spec.env = env;
  server_spec.stdout_fd = STDERR_FILENO;
  ChildProcess server = ChildProcess::spawn(server_spec);
  // The server needs a moment to listen; the client does not retry forever.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  Pipe out = Pipe::create();
  ChildProcess::Spec client_spec;
  client_spec.program = run.program;
  client_spec.argv = {run.program};
  client_spec.argv.insert(client_spec.argv.end(), run.client.begin(), run.client.end());
  client_spec.env = env;
  client_spec.stdout_fd = out.write.get();
  ChildProcess client = ChildProcess::spawn(client_spec);
  out.write.reset();
  LineReader reader(std::move(out.read));

  bool found = false;
  std::vector<std::string> printed;
  const auto deadline = Clock::now() + run.timeout;
  while (!reader.at_eof() || !client.poll()) {
    for (const auto& line : reader.read(std::chrono::milliseconds(50))) {
      if (!found && take_line(line)) {
        found = true;
      } else {
        printed.push_back(line);
      }
    }
    if (Clock::now() >= deadline) {
      client.kill();
      server.kill();
      throw std::runtime_error(fmt::format("{} timed out after {} s", name,
                                           std::chrono::duration_cast<std::chrono::seconds>(run.timeout).count()));
    }
  }
  const ExitStatus status = *client.poll();
  server.kill(std::chrono::seconds(2));
  if (!status.ok() || !found) {
    std::string text;
    for (const auto& line : printed) text += "\n  " + line;
    throw std::runtime_error(fmt::format("{} {}{}{}", name, status.describe(), found ? "" : " without its result line",
                                         text.empty() ? "" : "; it printed:" + text));
  }
}

}  // namespace thd::bench::dc
