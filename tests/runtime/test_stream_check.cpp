// THD_STREAM_CHECK=1 (docs/streams.md, "Hazard checker"): workers report a tensor
// written on one stream and read or written on another with no event wait between,
// naming both ops and both streams; correct programs (event waits, also across
// nodes, the legacy default stream, host synchronization) stay silent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include <thd/distributed.h>
#include <thd/stream.h>

#include "job_fixture.h"
#include "remote_check.h"
#include "scoped_env.h"

namespace thd::test {
namespace {

class StreamCheck : public JobTest<2> {
 protected:
  static void SetUpTestSuite() {
    const ScopedEnv check("THD_STREAM_CHECK", "1");  // the workers started now inherit it
    JobTest<2>::SetUpTestSuite();
  }
};

// The planted race is a real one: the checker reports it once both ops have run,
// and under ThreadSanitizer the workers would abort on it first. Its own job, whose
// workers run with TSan's reports off; StreamCheck's correct programs keep them on.
class StreamCheckPlantedRace : public JobTest<2> {
 protected:
  static void SetUpTestSuite() {
    const ScopedEnv check("THD_STREAM_CHECK", "1");
    std::optional<ScopedEnv> quiet;
    if (kUnderThreadSanitizer) {
      const char* options = std::getenv("TSAN_OPTIONS");
      quiet.emplace("TSAN_OPTIONS", (std::string(options != nullptr ? options : "") + ":report_bugs=0").c_str());
    }
    JobTest<2>::SetUpTestSuite();
  }
};

// The text of the remote error the program gets from `t.get()` and then from
// synchronize() (whichever op the checker saw second is the one that fails).
std::string hazard_reported(const DistributedTensor& t) {
  std::string text;
  try {
    t.get();
  } catch (const RemoteError& e) {
    text += e.what();
  }
  try {
    synchronize();
  } catch (const RemoteError& e) {
    text += e.what();
  }
  return text;
}

TEST_F(StreamCheckPlantedRace, IsReportedNamingBothOpsAndStreams) {
  Stream writer = Stream::create(0);
  Stream reader = Stream::create(0);
  DistributedTensor x = DistributedTensor::zeros({1024});
  synchronize();
  {
    StreamScope in(writer);
    x.add_(1);
  }
  DistributedTensor y;
  {
    StreamScope in(reader);
    y = x * 2;  // no wait on the writer: a race
  }
  const std::string text = hazard_reported(y);
  EXPECT_NE(text.find("stream hazard"), std::string::npos) << text;
  EXPECT_NE(text.find("add_"), std::string::npos) << text;
  EXPECT_NE(text.find("mul"), std::string::npos) << text;
  EXPECT_NE(text.find("stream " + std::to_string(writer.id())), std::string::npos) << text;
  EXPECT_NE(text.find("stream " + std::to_string(reader.id())), std::string::npos) << text;
}

TEST_F(StreamCheck, CorrectProgramsAreSilent) {
  Stream writer = Stream::create(0);
  Stream reader = Stream::create(0);
  Stream relay = Stream::create(1);
  DistributedTensor x = DistributedTensor::zeros({1024});
  synchronize();
  // An event wait on the node.
  {
    StreamScope in(writer);
    x.add_(1);
  }
  reader.wait(writer.record());
  DistributedTensor y;
  {
    StreamScope in(reader);
    y = x * 2;
  }
  EXPECT_TRUE(same_tensor(y.get(), Tensor::full({1024}, 2.0f)));
  // Through another node's stream: writer -> node 1 -> reader.
  {
    StreamScope in(writer);
    x.add_(1);
  }
  relay.wait(writer.record());
  reader.wait(relay.record());
  {
    StreamScope in(reader);
    y = x * 3;
  }
  EXPECT_TRUE(same_tensor(y.get(), Tensor::full({1024}, 6.0f)));
  // The legacy default stream comes after the others, and they after it.
  {
    StreamScope in(writer);
    x.add_(1);
  }
  x.mul_(2);  // the default stream
  {
    StreamScope in(reader);
    y = x + 1;
  }
  EXPECT_TRUE(same_tensor(y.get(), Tensor::full({1024}, 7.0f)));
  // Host synchronization orders what the master issues next.
  {
    StreamScope in(writer);
    x.add_(1);
  }
  writer.synchronize();
  {
    StreamScope in(reader);
    y = x - 1;
  }
  EXPECT_TRUE(same_tensor(y.get(), Tensor::full({1024}, 6.0f)));
  EXPECT_NO_THROW(synchronize());
}

}  // namespace
}  // namespace thd::test
