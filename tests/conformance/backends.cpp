#include "backends.h"

#include <algorithm>

#include "rank_launched.h"

#include <thd/datachannel.h>

#include "datachannel/registry.h"

namespace thd::conformance {

const std::vector<std::string>& known_backends() {
  // The registry's: every backend folder of the build, built or not, and the
  // modules THD_BACKEND_PATH adds.
  static const std::vector<std::string> names = [] {
    std::vector<std::string> all;
    for (const auto& known : detail::known_backends()) all.emplace_back(known.name);
    for (const auto& name : DataChannel::available_backends()) {
      if (std::find(all.begin(), all.end(), name) == all.end()) all.push_back(name);
    }
    return all;
  }();
  return names;
}

bool is_built(const std::string& backend) {
  const auto built = DataChannel::available_backends();
  return std::find(built.begin(), built.end(), backend) != built.end();
}

std::string not_built_message(const std::string& backend) {
  std::string built;
  for (const auto& name : DataChannel::available_backends()) built += (built.empty() ? "" : ", ") + name;
  return "backend '" + backend + "' is not built into this thd (built: " + built + ")";
}

BackendTraits traits_of(const std::string& backend) {
  BackendTraits t;
  t.listens_on_tcp = backend == "tcp";
  // A backend with a launcher of its own (mpi's mpirun) takes its ranks from it.
  const detail::KnownBackend* known = detail::known_backend(backend);
  t.launched_ranks = known != nullptr && !known->launcher.empty();
  return t;
}

namespace {

// Why a built backend's case cannot run in this process, "" when it can.
std::string launch_mismatch(const std::string& backend) {
  if (!traits_of(backend).launched_ranks || launched_size() > 0) return "";
  return "the " + backend + " backend's ranks are an MPI launch's processes: ctest runs these cases under mpirun "
         "(tests conformance.mpi.n*)";
}

}  // namespace

void BackendTest::SetUp() {
  if (!is_built(backend())) GTEST_SKIP() << not_built_message(backend());
  if (const std::string why = launch_mismatch(backend()); !why.empty()) GTEST_SKIP() << why;
}

void ForkedRanksTest::SetUp() {
  BackendTest::SetUp();
  if (IsSkipped()) return;
  if (traits_of(backend()).launched_ranks) {
    GTEST_SKIP() << "the test makes its own ranks, but the " << backend()
                 << " backend's are mpirun's (MPI ends the whole job when a rank dies, and its processes "
                    "authenticate through the launcher: docs/backends.md)";
  }
}

void BackendWorldTest::SetUp() {
  if (!is_built(backend())) GTEST_SKIP() << not_built_message(backend());
  if (const std::string why = launch_mismatch(backend()); !why.empty()) GTEST_SKIP() << why;
  if (traits_of(backend()).launched_ranks && launched_size() != world_size()) {
    GTEST_SKIP() << "a world of " << world_size() << " ranks; this launch has " << launched_size();
  }
}

std::string backend_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

std::string backend_world_name(const ::testing::TestParamInfo<std::tuple<std::string, int>>& info) {
  return std::get<0>(info.param) + "_ws" + std::to_string(std::get<1>(info.param));
}

}  // namespace thd::conformance
