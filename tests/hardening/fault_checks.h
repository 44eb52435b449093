// Checks the fault tests share: an operation that must fail with a given error
// within a bound measured from the fault, and a job that must end cleanly anyway.
// Every measured time is also printed as "hardening-timing <case>: <ms> ms", the
// figures of docs/reliability.md.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "worker_job.h"

namespace thd::test {

// The bound the fault tests hold a lost worker's detection to.
inline constexpr milliseconds kNoticeWithin{2000};

// Prints "hardening-timing <test>/<what>: <ms> ms".
void report_timing(const std::string& what, milliseconds took);

// Prints "hardening-message <test>/<what>: <text>": what a user is told.
void report_message(const std::string& what, const std::string& text);

// `call` throws thd::WorkerLost naming `node` within `bound` of `since`.
::testing::AssertionResult throws_worker_lost(const std::function<void()>& call, int node, Clock::time_point since,
                                              const std::string& what, milliseconds bound = kNoticeWithin);

// `call` returns or throws a thd::Error, and does so within `bound` of `since`: it
// does not hang. What it threw, if anything, in *error.
::testing::AssertionResult ends_within(const std::function<void()>& call, Clock::time_point since,
                                       const std::string& what, std::exception_ptr* error = nullptr,
                                       milliseconds bound = kNoticeWithin);

// The dynamic type and message of an exception, for failure messages.
std::string describe(const std::exception_ptr& error);

// The job shuts down within a few seconds and every worker not in `dead` exits 0;
// shutdown() may report a lost node (WorkerLost), nothing else.
void expect_clean_end(WorkerJob& job, const std::vector<int>& dead);

}  // namespace thd::test
