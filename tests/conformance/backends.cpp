#include "backends.h"

#include <algorithm>

#include <thd/datachannel.h>

namespace thd::conformance {

const std::vector<std::string>& known_backends() {
  static const std::vector<std::string> names = {"tcp", "mpi", "ucx", "libfabric", "nccl"};
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
  return t;
}

void BackendTest::SetUp() {
  if (!is_built(backend())) GTEST_SKIP() << not_built_message(backend());
}

void BackendWorldTest::SetUp() {
  if (!is_built(backend())) GTEST_SKIP() << not_built_message(backend());
}

std::string backend_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

std::string backend_world_name(const ::testing::TestParamInfo<std::tuple<std::string, int>>& info) {
  return std::get<0>(info.param) + "_ws" + std::to_string(std::get<1>(info.param));
}

}  // namespace thd::conformance
