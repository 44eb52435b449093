// Streams and events over GPU work (needs a GPU; skips with "no CUDA device"
// elsewhere): a record completes when its stream's GPU work has, not when the
// worker has queued it; elapsed_time is the GPU's time; a stream of another node
// waiting on a GPU record waits for the GPU; queries and thd::synchronize see the
// GPU's work. Both workers of the job share this host's GPU 0.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <thd/cuda.h>
#include <thd/distributed.h>
#include <thd/stream.h>

#include "cuda_job_fixture.h"
#include "remote_check.h"

namespace thd::test {
namespace {

using Clock = std::chrono::steady_clock;

class RuntimeCudaStreams : public CudaJobTest<2> {};

const Device kGpu = Device::cuda(0);
constexpr int64_t kN = 4096;

// Tens of milliseconds of GPU work (each product ~137 GFLOP) that the worker queues
// in well under one: ones stay ones (each product is scaled back).
DistributedTensor gpu_work(int products = 24) {
  DistributedTensor a = DistributedTensor::ones({kN, kN}, kFloat32, kGpu);
  for (int i = 0; i < products; ++i) a = a.matmul(a).mul_(1.0f / static_cast<float>(kN));
  return a;
}

// Longer than a worker takes to queue gpu_work(48) (about a millisecond), shorter
// than the GPU takes to run it (over a hundred).
constexpr std::chrono::milliseconds kQueued{40};

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

TEST_F(RuntimeCudaStreams, ARecordCompletesWhenItsStreamsGpuWorkHas) {
  Stream s = Stream::create(0);
  {
    // The first GPU work of a stream loads kernels and makes cuBLAS state, which
    // holds the worker up: done first, so that queuing the work below is quick.
    StreamScope in(s);
    (void)gpu_work(2).slice(0, 0, 1).get();
  }
  DistributedTensor a;
  {
    StreamScope in(s);
    a = gpu_work(48);
  }
  Event done = s.record();
  // The worker queues the products in about a millisecond; the GPU takes over a
  // hundred. Well after the first, well before the second:
  std::this_thread::sleep_for(kQueued);
  EXPECT_FALSE(done.query()) << "the record completed before the GPU work it follows";
  EXPECT_FALSE(s.query()) << "the stream said idle while its GPU work ran";
  done.synchronize();
  EXPECT_TRUE(done.query());
  EXPECT_TRUE(s.query());
  EXPECT_TRUE(same_tensor(a.slice(0, 0, 2).get(), Tensor::ones({2, kN})));
}

TEST_F(RuntimeCudaStreams, ElapsedTimeIsTheGpusTime) {
  Stream s = Stream::create(0);
  Event start(/*enable_timing=*/true), end(/*enable_timing=*/true);
  const auto issued = Clock::now();
  {
    StreamScope in(s);
    start.record();
    DistributedTensor a = gpu_work();
    end.record();
  }
  end.synchronize();
  const double host_ms = ms_since(issued);
  const float gpu_ms = start.elapsed_time(end);
  // The products take the GPU tens of milliseconds, queuing them far less.
  EXPECT_GT(gpu_ms, 5.0f) << "elapsed_time measured the queuing, not the GPU";
  EXPECT_LE(gpu_ms, host_ms + 1.0) << "the GPU cannot have taken longer than the whole round";
  std::printf("[ figures  ] 24 products of %lld^2 float32: elapsed_time %.2f ms, host %.2f ms\n",
              static_cast<long long>(kN), gpu_ms, host_ms);
}

// How long the GPU work takes from the master's side, by a download (which waits
// for it whatever the events do).
double gpu_work_ms(int products) {
  Stream s = Stream::create(0);
  const auto issued = Clock::now();
  DistributedTensor a;
  {
    StreamScope in(s);
    a = gpu_work(products);
  }
  (void)a.slice(0, 0, 1).get();
  return ms_since(issued);
}

TEST_F(RuntimeCudaStreams, AStreamOfAnotherNodeWaitsForTheGpuWorkOfTheRecord) {
  const double work_ms = gpu_work_ms(24);
  Stream producer = Stream::create(0);
  Stream consumer = Stream::create(1);
  DistributedTensor x;
  const auto issued = Clock::now();
  {
    StreamScope in(producer);
    x = gpu_work(24);
  }
  Event produced = producer.record();
  consumer.wait(produced);
  Event after = consumer.record();
  after.synchronize();
  // Node 1's stream went on only once node 0's GPU had done the products.
  EXPECT_GE(ms_since(issued), 0.5 * work_ms) << "node 1 went on before node 0's GPU work was done";
  EXPECT_GE(detail::event_time_ns(after), detail::event_time_ns(produced));
  DistributedTensor y;
  {
    StreamScope send_on(producer);
    StreamScope receive_on(consumer);
    y = x.slice(0, 0, 2).contiguous().to_node(1);
    y.add_(1);
  }
  EXPECT_EQ(y.node(), 1);
  EXPECT_TRUE(same_tensor(y.get(), Tensor::full({2, kN}, 2.0f)));
}

TEST_F(RuntimeCudaStreams, SynchronizeWaitsForTheGpuWorkOfEveryStream) {
  const double work_ms = gpu_work_ms(24);
  Stream s0 = Stream::create(0);
  Stream s1 = Stream::create(1, Stream::Priority::High);
  Event end0, end1;
  const auto issued = Clock::now();
  {
    StreamScope a(s0);
    DistributedTensor w0 = gpu_work(24);
    end0.record();
  }
  {
    StreamScope b(s1);
    DistributedTensor w1 = gpu_work(24);
    end1.record();
  }
  synchronize();
  EXPECT_GE(ms_since(issued), 0.5 * work_ms) << "synchronize() returned before the GPU work was done";
  // Every record before it has completed, and the streams are idle.
  EXPECT_TRUE(end0.query());
  EXPECT_TRUE(end1.query());
  EXPECT_TRUE(s0.query());
  EXPECT_TRUE(s1.query());
}

TEST_F(RuntimeCudaStreams, TensorsFreedWhileAnotherStreamsKernelsUseThemKeepTheirValues) {
  // b is made on s0 and read on s1 behind long work; its handle goes (and the worker
  // frees it) while that work runs. Memory s0 takes afterwards must not be b's until
  // s1's kernels are done with it.
  Stream s0 = Stream::create(0);
  Stream s1 = Stream::create(0);
  DistributedTensor b;
  {
    StreamScope in(s0);
    b = DistributedTensor::full({kN, kN}, 1.0f, kFloat32, kGpu);
  }
  Event made = s0.record();
  s1.wait(made);
  DistributedTensor sum;
  {
    StreamScope in(s1);
    DistributedTensor slow = gpu_work(48);
    sum = slow.matmul(b).mul_(1.0f / static_cast<float>(kN));  // reads b after the slow work
  }
  b = DistributedTensor();
  // The free reaches the worker and runs there (its streams have queued everything)
  // while the GPU is still at the slow work.
  std::this_thread::sleep_for(kQueued);
  {
    StreamScope in(s0);
    for (int i = 0; i < 4; ++i) DistributedTensor::full({kN, kN}, -7.0f, kFloat32, kGpu);  // b's size
  }
  EXPECT_TRUE(same_tensor(sum.slice(0, 0, 2).get(), Tensor::ones({2, kN})));
}

}  // namespace
}  // namespace thd::test
