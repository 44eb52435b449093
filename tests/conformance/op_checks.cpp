#include "op_checks.h"

#include <set>
#include <string>
#include <vector>

#include "checks.h"
#include "tensors.h"

namespace thd::conformance {

namespace {

std::string with_root(const std::string& what, int root) { return what + " root " + std::to_string(root); }

// Rank i's block for rank j in all_to_all.
Tensor a2a_block(DType dtype, int64_t block, int from, int to, uint64_t salt) {
  return pattern(dtype, block, seed_of(from * 64 + to, salt));
}

// Every rank's pattern, in rank order, as one flat tensor.
Tensor every_rank_pattern(DType dtype, int64_t numel, int world_size, uint64_t salt) {
  std::vector<Tensor> parts;
  for (int r = 0; r < world_size; ++r) parts.push_back(pattern(dtype, numel, seed_of(r, salt)));
  return cat(parts, 0);
}

}  // namespace

void check_send_recv_ring(DataChannel& dc, DType dtype, int64_t numel, int64_t tag, uint64_t salt) {
  const int n = dc.size();
  if (n < 2) return;
  const int r = dc.rank();
  const int next = (r + 1) % n;
  const int prev = (r + n - 1) % n;
  const std::string what = label("send/recv", dtype, numel, n) + " tag " + std::to_string(tag);
  const Tensor mine = pattern(dtype, numel, seed_of(r, salt));
  Request sent = dc.isend(mine, next, {.tag = tag});
  Tensor got = sentinel(dtype, {numel, 1});
  const int source = dc.recv(got, prev, {.tag = tag});
  sent.wait();
  require(source == prev, what + ": recv returned source " + std::to_string(source) + ", expected " +
                              std::to_string(prev));
  require_same(got, pattern(dtype, numel, seed_of(prev, salt)), what);
}

void check_bytes_ring(DataChannel& dc, size_t nbytes, int64_t tag, uint64_t salt) {
  const int n = dc.size();
  if (n < 2) return;
  const int r = dc.rank();
  const int next = (r + 1) % n;
  const int prev = (r + n - 1) % n;
  const std::string what = "send_bytes/recv_bytes of " + std::to_string(nbytes) + " bytes ws" + std::to_string(n);
  const Tensor mine = pattern(kUInt8, static_cast<int64_t>(nbytes), seed_of(r, salt));
  Request sent = dc.isend_bytes({static_cast<const uint8_t*>(mine.numel() ? mine.data_ptr() : nullptr), nbytes},
                                next, {.tag = tag});
  Tensor got = sentinel(kUInt8, {static_cast<int64_t>(nbytes)});
  Request received =
      dc.irecv_bytes({static_cast<uint8_t*>(got.numel() ? got.data_ptr() : nullptr), nbytes}, prev, {.tag = tag});
  received.wait();
  sent.wait();
  require(received.source() == prev, what + ": Request::source() is " + std::to_string(received.source()) +
                                         ", expected " + std::to_string(prev));
  require(received.bytes() == nbytes, what + ": Request::bytes() is " + std::to_string(received.bytes()));
  require_same(got, pattern(kUInt8, static_cast<int64_t>(nbytes), seed_of(prev, salt)), what);
}

void check_any_source(DataChannel& dc, int64_t tag, uint64_t salt) {
  const int n = dc.size();
  const int r = dc.rank();
  constexpr int64_t kNumel = 5;
  if (r != 0) {
    dc.send(pattern(kInt64, kNumel, seed_of(r, salt)), 0, {.tag = tag});
    return;
  }
  std::set<int> seen;
  for (int i = 1; i < n; ++i) {
    Tensor got = sentinel(kInt64, {kNumel});
    const int source = dc.recv(got, kAnySource, {.tag = tag});
    const std::string what = "recv from kAnySource (message " + std::to_string(i) + " of " + std::to_string(n - 1) +
                             ", ws" + std::to_string(n) + ")";
    require(source >= 1 && source < n, what + ": returned source " + std::to_string(source));
    require(seen.insert(source).second, what + ": source " + std::to_string(source) + " reported twice");
    require_same(got, pattern(kInt64, kNumel, seed_of(source, salt)), what + " from rank " + std::to_string(source));
  }
}

void check_broadcast(DataChannel& dc, DType dtype, int64_t numel, int root, uint64_t salt) {
  const Tensor expected = pattern(dtype, numel, seed_of(root, salt));
  Tensor t = dc.rank() == root ? expected.clone() : sentinel(dtype, {numel});
  dc.broadcast(t, root);
  require_same(t, expected, with_root(label("broadcast", dtype, numel, dc.size()), root));
}

void check_all_reduce(DataChannel& dc, DType dtype, int64_t numel, ReduceOp op, uint64_t salt) {
  Tensor t = reduce_operand(op, dtype, dc.rank(), dc.size(), numel, salt);
  dc.all_reduce(t, op);
  require_same(t, reduce_reference(op, dtype, dc.size(), numel, salt),
               label("all_reduce " + std::string(reduce_op_name(op)), dtype, numel, dc.size()));
}

void check_reduce(DataChannel& dc, DType dtype, int64_t numel, int root, ReduceOp op, uint64_t salt) {
  const Tensor mine = reduce_operand(op, dtype, dc.rank(), dc.size(), numel, salt);
  Tensor t = mine.clone();
  dc.reduce(t, root, op);
  const std::string what = with_root(label("reduce " + std::string(reduce_op_name(op)), dtype, numel, dc.size()), root);
  if (dc.rank() == root) {
    require_same(t, reduce_reference(op, dtype, dc.size(), numel, salt), what);
  } else {
    require_same(t, mine, what + " (a non-root's tensor must be unchanged)");
  }
}

void check_all_gather(DataChannel& dc, DType dtype, int64_t numel, uint64_t salt) {
  const int n = dc.size();
  Tensor out = sentinel(dtype, {n, numel});
  dc.all_gather(out, pattern(dtype, numel, seed_of(dc.rank(), salt)));
  require_same(out, every_rank_pattern(dtype, numel, n, salt), label("all_gather", dtype, numel, n));
}

void check_reduce_scatter(DataChannel& dc, DType dtype, int64_t block, ReduceOp op, uint64_t salt) {
  const int n = dc.size();
  const int r = dc.rank();
  const Tensor in = reduce_operand(op, dtype, r, n, n * block, salt);
  Tensor out = sentinel(dtype, {block});
  dc.reduce_scatter(out, in, op);
  const Tensor expected = reduce_reference(op, dtype, n, n * block, salt).slice(0, r * block, (r + 1) * block);
  require_same(out, expected, label("reduce_scatter " + std::string(reduce_op_name(op)), dtype, block, n));
  require_same(in, reduce_operand(op, dtype, r, n, n * block, salt),
               label("reduce_scatter (its input must be unchanged)", dtype, block, n));
}

void check_gather(DataChannel& dc, DType dtype, int64_t numel, int root, bool undefined_elsewhere, uint64_t salt) {
  const int n = dc.size();
  const bool is_root = dc.rank() == root;
  const std::string what = with_root(label("gather", dtype, numel, n), root);
  Tensor out = is_root || !undefined_elsewhere ? sentinel(dtype, {n * numel}) : Tensor();
  dc.gather(out, pattern(dtype, numel, seed_of(dc.rank(), salt)), root);
  if (is_root) {
    require_same(out, every_rank_pattern(dtype, numel, n, salt), what);
  } else if (!undefined_elsewhere) {
    require_same(out, sentinel(dtype, {n * numel}), what + " (a non-root's output must be unchanged)");
  }
}

void check_scatter(DataChannel& dc, DType dtype, int64_t numel, int root, bool undefined_elsewhere, uint64_t salt) {
  const int n = dc.size();
  const bool is_root = dc.rank() == root;
  Tensor in = is_root ? every_rank_pattern(dtype, numel, n, salt)
                      : (undefined_elsewhere ? Tensor() : sentinel(dtype, {n, numel}));
  Tensor out = sentinel(dtype, {numel});
  dc.scatter(out, in, root);
  require_same(out, pattern(dtype, numel, seed_of(dc.rank(), salt)), with_root(label("scatter", dtype, numel, n), root));
}

void check_all_to_all(DataChannel& dc, DType dtype, int64_t block, uint64_t salt) {
  const int n = dc.size();
  const int r = dc.rank();
  std::vector<Tensor> mine;
  std::vector<Tensor> expected;
  for (int j = 0; j < n; ++j) {
    mine.push_back(a2a_block(dtype, block, r, j, salt));
    expected.push_back(a2a_block(dtype, block, j, r, salt));
  }
  Tensor out = sentinel(dtype, {n, block});
  dc.all_to_all(out, cat(mine, 0).reshape({n, block}));
  require_same(out, cat(expected, 0), label("all_to_all", dtype, block, n));
}

void exercise_every_op(DataChannel& dc, uint64_t salt) {
  const int last = dc.size() - 1;
  check_send_recv_ring(dc, kFloat32, 7, 1, salt + 1);
  check_send_recv_ring(dc, kInt64, 1, 2, salt + 2);
  check_bytes_ring(dc, 13, 3, salt + 3);
  check_any_source(dc, 4, salt + 4);
  for (int root : {0, last}) {
    check_broadcast(dc, kFloat32, 7, root, salt + 5);
    check_reduce(dc, kFloat64, 7, root, ReduceOp::Max, salt + 6);
    check_gather(dc, kInt32, 7, root, root == 0, salt + 7);
    check_scatter(dc, kInt64, 7, root, root == 0, salt + 8);
  }
  check_all_reduce(dc, kFloat32, 7, ReduceOp::Sum, salt + 9);
  check_all_reduce(dc, kInt64, 7, ReduceOp::BXor, salt + 10);
  check_all_gather(dc, kFloat32, 7, salt + 11);
  check_reduce_scatter(dc, kInt32, 7, ReduceOp::Sum, salt + 12);
  check_all_to_all(dc, kInt64, 3, salt + 13);
  dc.barrier();
}

}  // namespace thd::conformance
