// THD_MPI_NATIVE_MAX_BYTES: one bound for every collective, or bounds by name over
// the measured crossovers; anything else is refused naming the variable.
#include <gtest/gtest.h>

#include <string>

#include <thd/error.h>

#include "datachannel/mpi/mpi_host_collectives.h"

namespace thd::detail::mpi {
namespace {

TEST(NativeLimits, UnsetKeepsTheMeasuredCrossovers) {
  const NativeLimits d = parse_native_limits("");
  EXPECT_EQ(d.all_reduce_bytes, size_t{8} << 10);
  EXPECT_EQ(d.broadcast_bytes, size_t{64} << 10);
  EXPECT_EQ(d.all_gather_bytes, size_t{64} << 10);
  EXPECT_EQ(d.all_to_all_bytes, size_t{256} << 10);
  EXPECT_EQ(d.reduce_scatter_bytes, size_t{4} << 10);
}

TEST(NativeLimits, ANumberBoundsEveryCollective) {
  const NativeLimits all = parse_native_limits("1000");
  EXPECT_EQ(all.all_reduce_bytes, 1000u);
  EXPECT_EQ(all.reduce_scatter_bytes, 1000u);
  EXPECT_FALSE(parse_native_limits("0").any());
}

TEST(NativeLimits, NamedBoundsSetOnlyTheirCollectives) {
  const NativeLimits d = parse_native_limits("");
  const NativeLimits l = parse_native_limits("all_reduce=16384,broadcast=0");
  EXPECT_EQ(l.all_reduce_bytes, 16384u);
  EXPECT_EQ(l.broadcast_bytes, 0u);
  EXPECT_EQ(l.all_gather_bytes, d.all_gather_bytes);
  EXPECT_EQ(l.all_to_all_bytes, d.all_to_all_bytes);
  EXPECT_EQ(l.reduce_scatter_bytes, d.reduce_scatter_bytes);
}

TEST(NativeLimits, MalformedValuesAreRefusedNamingTheVariable) {
  for (const char* bad : {"lots", "-1", "8K", "all_reduce", "all_reduce=", "allreduce=5", "all_reduce=5,,"}) {
    SCOPED_TRACE(bad);
    try {
      (void)parse_native_limits(bad);
      ADD_FAILURE() << "accepted";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("THD_MPI_NATIVE_MAX_BYTES"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace thd::detail::mpi
