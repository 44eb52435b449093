// The fixture of the runtime tests: every suite derived from JobTest<W> shares one
// LocalJob of W workers, started before its first test and shut down after its last
// (so the whole binary starts and ends several sessions in one process).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <thd/distributed.h>

#include "local_job.h"

namespace thd::test {

template <int Workers>
class JobTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    start_error_.clear();
    try {
      job_ = std::make_unique<LocalJob>(Workers);
    } catch (const std::exception& e) {
      start_error_ = e.what();
    }
  }

  static void TearDownTestSuite() {
    if (!job_) return;
    const std::string problems = job_->stop().problems();
    // Reported against the suite: the session did not end cleanly.
    if (!problems.empty()) ADD_FAILURE() << "the job of " << Workers << " workers ended badly: " << problems;
    job_.reset();
  }

  void SetUp() override {
    ASSERT_TRUE(job_) << "the job of " << Workers << " workers did not start: " << start_error_;
    ASSERT_EQ(num_nodes(), Workers);
  }

  // A test must raise every remote error it causes: one still pending here would be
  // blamed on the next test.
  void TearDown() override {
    if (!job_) return;
    try {
      synchronize();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the test left an unreported error behind: " << e.what();
    }
  }

  static LocalJob& job() { return *job_; }

 private:
  static inline std::unique_ptr<LocalJob> job_;
  static inline std::string start_error_;
};

}  // namespace thd::test
