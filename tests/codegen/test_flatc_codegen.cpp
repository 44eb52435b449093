// The build generates FlatBuffers headers with flatc (cmake/ThdFlatbuffers.cmake);
// this checks the generated code compiles, builds and verifies a message.
#include <gtest/gtest.h>

#include <flatbuffers/flatbuffers.h>

#include "codegen_check_generated.h"

namespace {

TEST(Build, FlatcGeneratedHeaderRoundTrips) {
  flatbuffers::FlatBufferBuilder b;
  auto name = b.CreateString("probe");
  auto sizes = b.CreateVector(std::vector<int64_t>{2, 3});
  b.Finish(thd::test::CreateProbe(b, 42, name, sizes));
  flatbuffers::Verifier v(b.GetBufferPointer(), b.GetSize());
  ASSERT_TRUE(thd::test::VerifyProbeBuffer(v));
  auto* p = thd::test::GetProbe(b.GetBufferPointer());
  EXPECT_EQ(p->id(), 42u);
  EXPECT_EQ(p->name()->str(), "probe");
  EXPECT_EQ(p->sizes()->size(), 2u);
  // A truncated buffer must fail verification, not be read.
  flatbuffers::Verifier bad(b.GetBufferPointer(), b.GetSize() / 2);
  EXPECT_FALSE(thd::test::VerifyProbeBuffer(bad));
}

}  // namespace
