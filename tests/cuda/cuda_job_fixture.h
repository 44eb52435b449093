// The fixture of the runtime's GPU tests: a master-worker job of W workers on this
// host (tests/runtime/job_fixture.h), started only where there is a GPU; elsewhere
// every test skips with "no CUDA device" without starting one.
#pragma once

#include <thd/cuda.h>

#include "cuda_test_util.h"
#include "job_fixture.h"

namespace thd::test {

template <int Workers>
class CudaJobTest : public JobTest<Workers> {
 protected:
  static void SetUpTestSuite() {
    if (cuda::is_available()) JobTest<Workers>::SetUpTestSuite();
  }
  void SetUp() override {
    THD_REQUIRE_CUDA();
    JobTest<Workers>::SetUp();
  }
};

}  // namespace thd::test
