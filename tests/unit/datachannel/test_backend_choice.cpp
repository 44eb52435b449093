// The backend a job runs on when the program names none: THD_BACKEND (what thdrun
// --backend exports), else tcp, for init_process_group as for init_master_worker.
#include <gtest/gtest.h>

#include <thd/process_group.h>

#include "datachannel/backend_choice.h"
#include "expect_throw.h"
#include "scoped_env.h"
#include "test_util.h"

namespace thd {
namespace {

TEST(BackendChoice, TheProgramsChoiceThenTheLaunchersThenTcp) {
  {
    test::ScopedEnv env("THD_BACKEND", "ucx");
    EXPECT_EQ(detail::chosen_backend("mpi"), "mpi");
    EXPECT_EQ(detail::chosen_backend(""), "ucx");
  }
  {
    test::ScopedEnv env("THD_BACKEND", "");
    EXPECT_EQ(detail::chosen_backend(""), "tcp");
  }
  test::ScopedEnv env("THD_BACKEND", nullptr);
  EXPECT_EQ(detail::chosen_backend(""), "tcp");
}

ProcessGroupOptions one_rank(uint16_t port) {
  ProcessGroupOptions o;
  o.init_method = "tcp://127.0.0.1:" + std::to_string(port);
  o.world_size = 1;
  o.rank = 0;
  o.timeout = std::chrono::milliseconds(10000);
  o.token = std::string("backend-choice-test-token");
  return o;
}

TEST(BackendChoice, InitProcessGroupWithoutABackendReadsTheLaunchers) {
  {
    // A name no build has: the channel is made over what THD_BACKEND says.
    test::ScopedEnv env("THD_BACKEND", "no-such-backend");
    THD_EXPECT_THROW_MSG(init_process_group(one_rank(test::free_port())), ValueError, "no-such-backend");
    EXPECT_FALSE(is_initialized());
  }
  test::ScopedEnv env("THD_BACKEND", "tcp");
  init_process_group(one_rank(test::free_port()));
  EXPECT_EQ(get_backend(), "tcp");
  destroy_process_group();
}

}  // namespace
}  // namespace thd
