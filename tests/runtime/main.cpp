// The runtime tests' main: the same binary is the master (gtest) and, run with
// --thd-test-worker, one worker of a LocalJob.
#include <gtest/gtest.h>

#include "local_job.h"

int main(int argc, char** argv) {
  thd::test::run_worker_if_asked(argc, argv);  // never returns in a worker
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
