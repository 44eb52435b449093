// Which backends the suite runs on: every backend thd knows, so that a build
// without one reports its tests as skipped (and says why) instead of silently
// running fewer tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace thd::conformance {

// Every backend name DataChannel::create knows, built into this thd or not, as
// the backend registry lists them.
const std::vector<std::string>& known_backends();

// True iff DataChannel::available_backends() lists it.
bool is_built(const std::string& backend);

// The message a test skips with for a backend this build leaves out.
std::string not_built_message(const std::string& backend);

// What the suite must know of a backend beyond its name.
struct BackendTraits {
  // Ranks accept connections on TCP ports of their own (the unauthenticated
  // connection tests aim at those as well as at the store).
  bool listens_on_tcp = false;
  // Its ranks are the processes of an MPI launch (mpi): the suite runs under
  // mpirun, one rank per process, and cases that fork their own ranks skip.
  bool launched_ranks = false;
};
BackendTraits traits_of(const std::string& backend);

// World sizes of the collective matrix: 1 (every op is a copy), 2 (the smallest
// exchange), 3 and 5 (odd sizes, where ring and tree algorithms have remainders).
inline const std::vector<int> kWorldSizes = {1, 2, 3, 5};

// Test fixtures. SetUp skips a backend that is not built.
class BackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  const std::string& backend() const { return GetParam(); }
};

// For cases whose ranks the test forks or runs as threads itself (peer death,
// rendezvous in processes, auth with the backend's own connections): skipped for
// launched backends.
class ForkedRanksTest : public BackendTest {
 protected:
  void SetUp() override;
};

class BackendWorldTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void SetUp() override;
  const std::string& backend() const { return std::get<0>(GetParam()); }
  int world_size() const { return std::get<1>(GetParam()); }
};

// Test-name suffixes: "tcp", "tcp_ws3".
std::string backend_name(const ::testing::TestParamInfo<std::string>& info);
std::string backend_world_name(const ::testing::TestParamInfo<std::tuple<std::string, int>>& info);

}  // namespace thd::conformance

// Instantiates a BackendTest-derived suite for every known backend.
#define THD_CONFORMANCE_BACKENDS(Suite)                                                              \
  INSTANTIATE_TEST_SUITE_P(AllBackends, Suite, ::testing::ValuesIn(::thd::conformance::known_backends()), \
                           ::thd::conformance::backend_name)

// Instantiates a BackendWorldTest-derived suite for every known backend x `sizes`.
#define THD_CONFORMANCE_BACKENDS_X_WORLDS(Suite, sizes)                                           \
  INSTANTIATE_TEST_SUITE_P(AllBackends, Suite,                                                    \
                           ::testing::Combine(::testing::ValuesIn(::thd::conformance::known_backends()), \
                                              ::testing::ValuesIn(sizes)),                        \
                           ::thd::conformance::backend_world_name)
