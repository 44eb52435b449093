#include "fault_checks.h"

#include <algorithm>
#include <cstdio>
#include <typeinfo>

#include <thd/error.h>

namespace thd::test {

namespace {

std::string current_test() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info != nullptr ? std::string(info->test_suite_name()) + "." + info->name() : "?";
}

}  // namespace

void report_timing(const std::string& what, milliseconds took) {
  std::printf("hardening-timing %s/%s: %lld ms\n", current_test().c_str(), what.c_str(),
              static_cast<long long>(took.count()));
  std::fflush(stdout);
}

void report_message(const std::string& what, const std::string& text) {
  std::printf("hardening-message %s/%s: %s\n", current_test().c_str(), what.c_str(), text.c_str());
  std::fflush(stdout);
}

std::string describe(const std::exception_ptr& error) {
  if (!error) return "nothing";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return std::string(typeid(e).name()) + ": " + e.what();
  } catch (...) {
    return "a non-std exception";
  }
}

::testing::AssertionResult throws_worker_lost(const std::function<void()>& call, int node, Clock::time_point since,
                                              const std::string& what, milliseconds bound) {
  try {
    call();
    return ::testing::AssertionFailure() << what << ": did not throw";
  } catch (const WorkerLost& e) {
    const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - since);
    report_timing(what, took);
    if (took > bound) return ::testing::AssertionFailure() << what << ": WorkerLost after " << took.count() << " ms";
    const std::string text = e.what();
    if (e.context().node != node || text.find("node " + std::to_string(node)) == std::string::npos) {
      return ::testing::AssertionFailure() << what << ": WorkerLost does not name node " << node << ": " << text;
    }
    return ::testing::AssertionSuccess();
  } catch (...) {
    return ::testing::AssertionFailure() << what << ": threw " << describe(std::current_exception());
  }
}

::testing::AssertionResult ends_within(const std::function<void()>& call, Clock::time_point since,
                                       const std::string& what, std::exception_ptr* error, milliseconds bound) {
  std::exception_ptr thrown;
  try {
    call();
  } catch (const Error&) {
    thrown = std::current_exception();
  } catch (...) {
    return ::testing::AssertionFailure() << what << ": threw " << describe(std::current_exception());
  }
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - since);
  report_timing(what, took);
  if (error != nullptr) *error = thrown;
  if (took > bound) {
    return ::testing::AssertionFailure() << what << ": ended after " << took.count() << " ms (" << describe(thrown)
                                         << ")";
  }
  return ::testing::AssertionSuccess();
}

void expect_clean_end(WorkerJob& job, const std::vector<int>& dead) {
  const JobEnd& end = job.stop();
  EXPECT_LT(end.shutdown_took, milliseconds(5000)) << "shutdown() after the fault took too long";
  for (int node = 0; node < static_cast<int>(end.exit_codes.size()); ++node) {
    if (std::find(dead.begin(), dead.end(), node) != dead.end()) continue;
    EXPECT_EQ(end.exit_codes[static_cast<size_t>(node)], 0) << "worker of node " << node << ":\n" << job.output(node);
  }
  if (end.shutdown_error) {
    try {
      std::rethrow_exception(end.shutdown_error);
    } catch (const WorkerLost&) {
      // shutdown() may report the lost node.
    } catch (...) {
      ADD_FAILURE() << "shutdown() threw " << describe(end.shutdown_error);
    }
  }
}

}  // namespace thd::test
