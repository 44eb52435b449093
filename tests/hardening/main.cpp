// The hardening tests' main: the gtest process, or, run with a role flag, one of
// the programs the tests start (roles.h).
#include <gtest/gtest.h>

#include "roles.h"

int main(int argc, char** argv) {
  // A role's status is main's: the "return" master scenario must return from main.
  if (const std::optional<int> status = thd::test::run_role_if_asked(argc, argv)) return *status;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
