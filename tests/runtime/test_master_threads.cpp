// The master reads the replies of every node on one thread: its thread count is the
// same for a job of 8 worker nodes as for a job of 1.
#include <gtest/gtest.h>

#include <thd/distributed.h>

#include "local_job.h"
#include "remote_check.h"
#include "thread_count.h"

namespace thd::test {
namespace {

// Runs one op on every node (each answers through the reply path) and returns the
// master's thread count while the job is up.
size_t threads_of_job(int workers) {
  LocalJob job(workers);
  std::vector<DistributedTensor> on_nodes;
  for (int node = 0; node < workers; ++node) {
    NodeScope on(node);
    on_nodes.push_back(DistributedTensor::full({4}, static_cast<float>(node)) + 1);
  }
  for (int node = 0; node < workers; ++node) {
    EXPECT_TRUE(same_tensor(on_nodes[static_cast<size_t>(node)].get(), Tensor::full({4}, node + 1.0f)));
  }
  synchronize();
  const size_t threads = thread_count();
  on_nodes.clear();
  EXPECT_EQ(job.stop().problems(), "");
  return threads;
}

TEST(MasterThreads, FlatInTheNumberOfNodes) {
  const size_t one = threads_of_job(1);
  const size_t eight = threads_of_job(8);
  RecordProperty("threads_with_1_node", static_cast<int>(one));
  RecordProperty("threads_with_8_nodes", static_cast<int>(eight));
  // Room for a thread or two that starts on its own schedule (the backend's, the
  // kernel pool's), far less than the 7 more a thread per node would add.
  EXPECT_LE(eight, one + 2) << "threads with 1 node: " << one << ", with 8 nodes: " << eight;
}

}  // namespace
}  // namespace thd::test
