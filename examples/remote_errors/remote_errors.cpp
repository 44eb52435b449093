// Where errors surface in master-worker mode.
//
// - A call whose shapes or dtypes do not fit throws at the line that made it: the
//   master knows every tensor's metadata and checks before anything is sent.
// - An op that can only fail on the worker (here: an index out of range, which
//   depends on the index tensor's values) fails there, asynchronously. The worker
//   keeps running; the op's output is poisoned, and so is everything computed from
//   it. The master raises thd::RemoteError, naming the op, its node and the
//   worker's message, at the next sync point that depends on it (get(), item(),
//   thd::synchronize()).
//
//   thdrun -n 2 build/examples/remote_errors
#include <thd/thd.h>

#include <cstdio>
#include <string>

int main() {
  thd::init_master_worker();
  bool ok = true;

  auto a = thd::DistributedTensor::ones({3, 4});
  auto b = thd::DistributedTensor::ones({5});
  try {
    (void)(a + b);  // [3, 4] + [5] cannot broadcast
    ok = false;
    std::printf("a shape error was NOT raised at the call site\n");
  } catch (const thd::ShapeError& e) {
    std::printf("at the call site: %s\n", e.what());
  }

  // index 7 is out of range for dim 0 of size 3: only the worker can tell.
  auto index = thd::Tensor::from_vector<int64_t>({0, 7}).dist_send();
  auto picked = a.index_select(0, index);  // returns at once
  auto doubled = picked * 2;               // consumes a poisoned tensor: poisoned too
  auto fine = a.sum();                     // unrelated: unaffected
  try {
    (void)doubled.get();  // the sync point
    ok = false;
    std::printf("the remote error was NOT raised at get()\n");
  } catch (const thd::RemoteError& e) {
    std::printf("at get(): %s\n", e.what());
    std::printf("  the failing op: %s (op %llu) on node %d\n", e.context().op.c_str(),
                static_cast<unsigned long long>(e.op_id()), e.context().node);
    ok = ok && e.context().op == "index_select" && e.context().node == 0;
  }
  const double total = fine.item<double>();
  std::printf("an unrelated tensor still works: a.sum() = %g (expected 12)\n", total);
  ok = ok && total == 12;

  // synchronize() does not raise the error again: it was reported at get().
  thd::synchronize();
  thd::shutdown();
  std::printf("%s\n", ok ? "errors surfaced where expected" : "SOMETHING WENT WRONG");
  return ok ? 0 : 1;
}
