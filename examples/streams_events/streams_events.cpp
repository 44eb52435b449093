// Streams and events across nodes (docs/streams.md): two streams of node 0 run
// independent work side by side, node 1 waits on an event of node 0 before it uses
// data copied from there (node 0 tells node 1 directly), and timed events measure
// the work between them.
//
//   thdrun -n 3 build/examples/streams_events      # the master + 2 workers
//   THD_TRACE=streams.json thdrun -n 3 build/examples/streams_events   # and a trace
#include <thd/thd.h>

#include <cstdio>

namespace {

bool all_ok = true;

void check(const char* what, double got, double expected) {
  const bool ok = got == expected;
  all_ok = all_ok && ok;
  std::printf("  %-58s = %g (expected %g)%s\n", what, got, expected, ok ? "" : "  <-- WRONG");
}

}  // namespace

int main() {
  thd::init_master_worker();
  if (thd::num_nodes() < 2) {
    std::printf("streams_events needs 2 nodes: thdrun -n 3 %s\n", "build/examples/streams_events");
    thd::shutdown();
    return 1;
  }

  // Two streams of node 0, each with its own chain of work: they may overlap.
  thd::Stream left = thd::Stream::create(0);
  thd::Stream right = thd::Stream::create(0, thd::Stream::Priority::High);
  thd::Event start(/*enable_timing=*/true);
  thd::Event end(/*enable_timing=*/true);
  start.record(left);
  thd::DistributedTensor a, b;
  {
    thd::StreamScope in(left);
    a = thd::DistributedTensor::ones({256, 256});
    for (int i = 0; i < 20; ++i) a = a.matmul(a).mul_(1.0f / 256.0f);  // stays all ones
  }
  {
    thd::StreamScope in(right);
    b = thd::DistributedTensor::arange(0, 1000, 1, thd::kFloat64);
    for (int i = 0; i < 50; ++i) b.add_(1);
  }
  // The left stream waits for the right one's work before it adds the two up.
  left.wait(right.record());
  thd::DistributedTensor sum;
  {
    thd::StreamScope in(left);
    sum = a.sum().to(thd::kFloat64) + b.sum();
  }
  end.record(left);
  end.synchronize();
  check("sum on the left stream after waiting on the right", sum.item<double>(), 256.0 * 256 + 1000 * 999 / 2 + 50 * 1000);
  const float ms = start.elapsed_time(end);
  std::printf("  left stream's work took %.3f ms (timed events)\n", static_cast<double>(ms));
  check("elapsed time is positive", ms > 0 ? 1 : 0, 1);

  // Node 1 waits on an event of node 0 before reading a tensor copied from there.
  thd::Stream far = thd::Stream::create(1);
  thd::DistributedTensor copy = a.to_node(1);  // lands on node 1 by its default stream
  thd::Event copied = thd::current_stream(1).record();
  far.wait(copied);
  thd::Event from_node0;
  {
    thd::StreamScope in(left);
    a.mul_(3);  // node 0 keeps working on its own copy
    from_node0.record();
  }
  far.wait(from_node0);  // across nodes: node 0 notifies node 1 directly
  thd::DistributedTensor seen;
  {
    thd::StreamScope in(far);
    seen = copy.sum();
  }
  check("node 1's stream read the copy after both waits", seen.item<float>(), 256.0 * 256);
  check("the cross-node event is complete", from_node0.query() ? 1 : 0, 1);
  check("and belongs to node", from_node0.node().value_or(-1), 0);

  thd::synchronize();
  for (const thd::NodeStats& n : thd::stats()) {
    std::printf("  node %d: %llu ops, %zu streams, %.1f MiB in use (peak %.1f)\n", n.node,
                static_cast<unsigned long long>(n.ops_executed), n.streams.size(),
                static_cast<double>(n.memory_in_use) / (1 << 20), static_cast<double>(n.memory_peak) / (1 << 20));
  }
  thd::shutdown();
  std::printf("streams_events: %s\n", all_ok ? "all results correct" : "WRONG RESULTS");
  return all_ok ? 0 : 1;
}
