#include "bench/datachannel/mpi_reference.h"

#include <unistd.h>

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

#include "bench/datachannel/process.h"

// Set by bench/CMakeLists.txt when it builds the reference: the program's and
// mpirun's paths.
#ifndef THD_BENCH_MPI_ALLREDUCE
#define THD_BENCH_MPI_ALLREDUCE ""
#endif
#ifndef THD_BENCH_MPIRUN
#define THD_BENCH_MPIRUN ""
#endif

namespace thd::bench::dc {
namespace {

constexpr std::string_view kProgram = THD_BENCH_MPI_ALLREDUCE;
constexpr std::string_view kMpirun = THD_BENCH_MPIRUN;

using Clock = std::chrono::steady_clock;

}  // namespace

bool mpi_reference_built() { return !kProgram.empty() && !kMpirun.empty(); }

bool mpirun_built() { return !kMpirun.empty(); }

std::string mpirun_path() { return std::string(kMpirun); }

double run_mpi_allreduce(const MpiAllreduceRun& run) {
  if (!mpi_reference_built()) throw std::logic_error("the MPI reference is not built");
  const std::string mpirun(kMpirun);
  // argv[0] is the bare name: Open MPI derives an installation prefix from an
  // absolute argv[0], a wrong one where /bin is a link to /usr/bin.
  std::vector<std::string> argv = {"mpirun",
                                   "-n", std::to_string(run.world_size),
                                   "--oversubscribe",
                                   "--mca", "btl", run.shared_memory ? "vader,self" : "tcp,self",
                                   "--mca", "pml", "ob1"};
  if (!run.shared_memory) argv.insert(argv.end(), {"--mca", "btl_tcp_if_include", "lo"});
  argv.insert(argv.end(), {std::string(kProgram), "--bytes", std::to_string(run.bytes), "--reps",
                           std::to_string(run.reps), "--min-time", fmt::format("{}", run.rep_seconds), "--name",
                           run.figure_name});
  std::vector<std::string> set;
  if (::geteuid() == 0) set = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};

  Pipe out = Pipe::create();
  ChildProcess::Spec spec;
  spec.program = mpirun;
  spec.argv = std::move(argv);
  spec.env = environment_with(set);
  spec.stdout_fd = out.write.get();
  spec.own_process_group = true;  // so a kill reaches the ranks too
  ChildProcess mpi = ChildProcess::spawn(spec);
  out.write.reset();
  LineReader reader(std::move(out.read));

  std::optional<double> value;
  std::vector<std::string> other;
  const auto deadline = Clock::now() + run.timeout;
  while (!reader.at_eof() || !mpi.poll()) {
    for (const auto& line : reader.read(std::chrono::milliseconds(50))) {
      const std::string prefix = run.figure_name + " ";
      if (line.rfind(prefix, 0) == 0 && line.size() > prefix.size() + 5 && line.ends_with(" GB/s")) {
        value = std::stod(line.substr(prefix.size()));
      } else {
        other.push_back(line);
      }
    }
    if (Clock::now() >= deadline) {
      mpi.kill(std::chrono::seconds(2));
      throw std::runtime_error(fmt::format("the MPI reference timed out after {} s",
                                           std::chrono::duration_cast<std::chrono::seconds>(run.timeout).count()));
    }
  }
  const ExitStatus status = *mpi.poll();
  mpi.kill();  // whatever mpirun left in its group
  std::string printed;
  for (const auto& line : other) printed += "\n  " + line;
  if (!status.ok() || !value) {
    throw std::runtime_error(fmt::format("the MPI reference ({}) {}{}{}", mpirun, status.describe(),
                                         value ? "" : " without printing its figure",
                                         printed.empty() ? "" : "; it printed:" + printed));
  }
  return *value;
}

}  // namespace thd::bench::dc
