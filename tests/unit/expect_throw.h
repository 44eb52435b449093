// EXPECT that `stmt` throws ExcType whose what() contains `needle`: error tests check
// what the user is told, not only the exception type.
#pragma once

#include <gtest/gtest.h>

#include <string>

#define THD_EXPECT_THROW_MSG(stmt, ExcType, needle)                                \
  do {                                                                             \
    try {                                                                          \
      stmt;                                                                        \
      ADD_FAILURE() << "expected " #ExcType " from: " #stmt;                       \
    } catch (const ExcType& e) {                                                   \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)             \
          << "message '" << e.what() << "' does not mention '" << (needle) << "'"; \
    }                                                                              \
  } while (0)
