#include <gtest/gtest.h>

#include <sstream>

#include "datachannel/op_label.h"

namespace thd::detail {
namespace {

TEST(OpLabel, PointToPointLabelsReadAsBefore) {
  EXPECT_EQ(OpLabel::send_to(1, 3).str(), "send to rank 1 (tag 3)");
  EXPECT_EQ(OpLabel::recv_from(2, 0).str(), "recv from rank 2 (tag 0)");
  EXPECT_EQ(OpLabel::recv_from(-1, 7).str(), "recv from any rank (tag 7)");
  EXPECT_EQ(OpLabel("all_reduce").str(), "all_reduce");
}

TEST(OpLabel, ConvertsWhereTextIsExpected) {
  const OpLabel op = OpLabel::send_to(4, 9);
  const std::string text = op;
  EXPECT_EQ(text, "send to rank 4 (tag 9)");
  EXPECT_EQ(fmt::format("[{}]", op), "[send to rank 4 (tag 9)]");
  EXPECT_EQ("'" + op, "'send to rank 4 (tag 9)");
  EXPECT_EQ(op + "'", "send to rank 4 (tag 9)'");
  std::ostringstream out;
  out << op;
  EXPECT_EQ(out.str(), "send to rank 4 (tag 9)");
}

}  // namespace
}  // namespace thd::detail
