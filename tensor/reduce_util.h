// The reduction engine behind sum, max, var, ...: lays the input out as kept (output)
// dims and reduced dims in memory order and drives a typed Op over it in parallel.
//
// Two walks cover every layout without striding against memory:
// - inner: the input's innermost dim is reduced, so each output folds contiguous runs
//   (sum(-1), and every full reduction). Many outputs are split among threads; a few
//   large ones are each split into chunks whose partial results are combined.
// - rows: the innermost dim is kept (sum(0) of [N, M]), so a tile of neighbouring
//   outputs is advanced one input row at a time, which the compiler vectorizes. Very
//   short inner runs ([N, 4].sum(1)) take this walk too, across outputs.
//
// An Op (in_t is its input storage type) provides:
//   acc_t identity() const;
//   acc_t run(acc_t a, const char* p, int64_t stride, int64_t n, const RunPos& pos) const;
//     folds the n elements p, p + stride, ... (byte stride) into a, in that order;
//   void rows_block(acc_t* acc, const char* p, int64_t stride, int64_t n,
//                   int64_t row_stride, int64_t rows, const RunPos& pos) const;
//     for each of `rows` rows (row r at p + r * row_stride) folds its element j into
//     acc[j], j < n: n different outputs, one element each per row;
//   acc_t combine(acc_t a, acc_t b) const;  // a holds elements that precede b's
//   out_t project(acc_t a, int64_t out) const;
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include <thd/tensor.h>

#include "tensor/parallel.h"
#include "tensor/shape_util.h"

namespace thd::detail {

// Where a run or a block of rows sits. run(): every element goes to output `out`,
// element k has reduction index ridx + k * ridx_stride. rows_block(): element j of
// every row goes to output out + j * out_stride, and row r has reduction index
// ridx + r * ridx_stride. The reduction index is the row-major position among the
// reduced dims (what argmax reports).
struct RunPos {
  int64_t out;
  int64_t out_stride;
  int64_t ridx;
  int64_t ridx_stride;
};

struct ReduceDim {
  int64_t size;
  int64_t in;    // input stride in bytes
  int64_t out;   // output stride in elements, 0 for reduced dims
  int64_t ridx;  // reduction index stride, 0 for kept dims
};

struct ReduceGeometry {
  const char* base = nullptr;
  std::vector<ReduceDim> kept;     // memory order, outermost first
  std::vector<ReduceDim> reduced;  // memory order, outermost first; never empty
  bool inner_kept = false;         // the innermost dim of all is a kept one
  int64_t n_out = 1;               // outputs
  int64_t n_red = 1;               // elements folded into each output
};

// make_reduce_geometry's general form: drops size-1 dims, sorts the rest into memory
// order and merges neighbours whose strides chain.
inline ReduceGeometry merged_reduce_geometry(const Tensor& in, const std::vector<bool>& reduce) {
  ReduceGeometry g;
  g.base = static_cast<const char*>(in.data_ptr());
  const int64_t nd = in.dim();
  Shape keep_shape = in.shape();
  for (int64_t d = 0; d < nd; ++d) {
    if (reduce[d]) keep_shape[d] = 1;
  }
  const Shape out_strides = contiguous_strides(keep_shape);
  std::vector<int64_t> ridx_strides(static_cast<size_t>(nd), 0);
  for (int64_t d = nd - 1, r = 1; d >= 0; --d) {
    if (reduce[d]) {
      ridx_strides[d] = r;
      r *= in.shape()[d];
    }
  }
  const auto es = static_cast<int64_t>(in.element_size());
  std::vector<ReduceDim> dims;
  std::vector<bool> is_red;
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t size = in.shape()[d];
    (reduce[d] ? g.n_red : g.n_out) *= size;
    if (size == 1) continue;
    dims.push_back({size, in.strides()[d] * es, reduce[d] ? 0 : out_strides[d], ridx_strides[d]});
    is_red.push_back(reduce[d]);
  }
  // Memory order of the input, outermost first; ties keep the logical order.
  std::vector<size_t> order(dims.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::abs(dims[a].in) > std::abs(dims[b].in);
  });
  // Merge neighbours of one kind whose strides chain, so a contiguous tensor reduced
  // over trailing dims becomes a single run.
  std::vector<ReduceDim> merged;
  std::vector<bool> merged_red;
  for (size_t j = order.size(); j-- > 0;) {
    const ReduceDim& d = dims[order[j]];
    const bool red = is_red[order[j]];
    if (!merged.empty() && merged_red.back() == red) {
      ReduceDim& m = merged.back();
      if (d.in == m.in * m.size && d.out == m.out * m.size && d.ridx == m.ridx * m.size) {
        m.size *= d.size;  // the strides stay those of the inner dim
        continue;
      }
    }
    merged.push_back(d);
    merged_red.push_back(red);
  }
  // `merged` runs inner to outer.
  g.inner_kept = !merged.empty() && !merged_red.front();
  for (size_t j = merged.size(); j-- > 0;) {
    (merged_red[j] ? g.reduced : g.kept).push_back(merged[j]);
  }
  // Reducing only size-1 dims: one element per output.
  if (g.reduced.empty()) g.reduced.push_back({1, 0, 0, 0});
  return g;
}

// `reduce[d]` marks the dims of `in` to reduce. The output is contiguous with the
// input's shape where reduced dims have size 1 (keepdim), so its flat index is the
// same whether or not those dims are kept.
inline ReduceGeometry make_reduce_geometry(const Tensor& in, const std::vector<bool>& reduce) {
  const int64_t n = in.numel();
  if (n > 1 && in.is_contiguous() && std::find(reduce.begin(), reduce.end(), false) == reduce.end()) {
    // A contiguous tensor reduced whole, as a small sum() is: one run, which is what
    // merged_reduce_geometry finds, without its sorting and allocations.
    ReduceGeometry g;
    g.base = static_cast<const char*>(in.data_ptr());
    g.n_red = n;
    g.reduced.push_back({n, static_cast<int64_t>(in.element_size()), 0, 1});
    return g;
  }
  return merged_reduce_geometry(in, reduce);
}

// Steps through the multi-index of `dims` (outermost first) in row-major order,
// tracking the input byte offset, output offset and reduction index.
class ReduceWalker {
 public:
  explicit ReduceWalker(std::vector<ReduceDim> dims)
      : dims_(std::move(dims)), idx_(dims_.size(), 0) {}

  void seek(int64_t linear) {
    in = out = ridx = 0;
    for (size_t d = dims_.size(); d-- > 0;) {
      const ReduceDim& r = dims_[d];
      idx_[d] = linear % r.size;
      linear /= r.size;
      in += idx_[d] * r.in;
      out += idx_[d] * r.out;
      ridx += idx_[d] * r.ridx;
    }
  }

  void next() {
    for (size_t d = dims_.size(); d-- > 0;) {
      const ReduceDim& r = dims_[d];
      in += r.in;
      out += r.out;
      ridx += r.ridx;
      if (++idx_[d] < r.size) return;
      idx_[d] = 0;
      in -= r.size * r.in;
      out -= r.size * r.out;
      ridx -= r.size * r.ridx;
    }
  }

  int64_t in = 0, out = 0, ridx = 0;

 private:
  std::vector<ReduceDim> dims_;
  std::vector<int64_t> idx_;
};

// An array of accumulators that threads may write element-wise (std::vector<bool>
// packs bits, so it cannot be one).
template <typename A>
class AccBuffer {
 public:
  AccBuffer(size_t n, A init) : p_(new A[n]) { std::fill(p_.get(), p_.get() + n, init); }
  A* data() { return p_.get(); }
  A& operator[](size_t i) { return p_[i]; }

 private:
  std::unique_ptr<A[]> p_;
};

inline int reduce_threads() { return in_parallel_region() ? 1 : num_threads(); }

// Splits [0, n) into at most `threads` chunks of >= grain elements.
inline int64_t reduce_chunks(int64_t n, int64_t grain, int threads) {
  return std::max<int64_t>(1, std::min<int64_t>(threads, n / std::max<int64_t>(grain, 1)));
}

template <typename Op>
void reduce_inner(const ReduceGeometry& g, const Op& op, typename Op::out_t* out) {
  using Acc = typename Op::acc_t;
  const ReduceDim run = g.reduced.back();
  const std::vector<ReduceDim> outer(g.reduced.begin(), g.reduced.end() - 1);
  // Folds reduced positions [begin, end) of the output at input offset `in`.
  auto fold = [&](int64_t in, int64_t o, int64_t begin, int64_t end, ReduceWalker& w) {
    Acc a = op.identity();
    int64_t off = begin % run.size;
    w.seek(begin / run.size);
    for (int64_t pos = begin; pos < end; off = 0, w.next()) {
      const int64_t n = std::min(run.size - off, end - pos);
      a = op.run(a, g.base + in + w.in + off * run.in, run.in, n,
                 RunPos{o, 0, w.ridx + off * run.ridx, run.ridx});
      pos += n;
    }
    return a;
  };
  const int threads = reduce_threads();
  if (g.n_out >= 8 * threads || g.n_red < 2 * kGrainSize) {
    parallel_for(0, g.n_out, std::max<int64_t>(1, kGrainSize / g.n_red), [&](int64_t b, int64_t e) {
      ReduceWalker ko(g.kept), w(outer);
      ko.seek(b);
      for (int64_t i = b; i < e; ++i, ko.next()) {
        out[ko.out] = op.project(fold(ko.in, ko.out, 0, g.n_red, w), ko.out);
      }
    });
    return;
  }
  // Few, large outputs: each one is split among the threads.
  const int64_t chunks = reduce_chunks(g.n_red, kGrainSize, threads);
  const int64_t per = (g.n_red + chunks - 1) / chunks;
  ReduceWalker ko(g.kept);
  ko.seek(0);
  for (int64_t i = 0; i < g.n_out; ++i, ko.next()) {
    AccBuffer<Acc> part(static_cast<size_t>(chunks), op.identity());
    parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
      ReduceWalker w(outer);
      for (int64_t c = cb; c < ce; ++c) {
        part[c] = fold(ko.in, ko.out, c * per, std::min(g.n_red, (c + 1) * per), w);
      }
    });
    Acc a = part[0];
    for (int64_t c = 1; c < chunks; ++c) a = op.combine(a, part[c]);
    out[ko.out] = op.project(a, ko.out);
  }
}

template <typename Op>
void reduce_rows(const ReduceGeometry& g, const Op& op, typename Op::out_t* out) {
  using Acc = typename Op::acc_t;
  // Outputs advance in tiles: long enough that each row segment streams from memory
  // (short segments at a large stride run at a fraction of the bandwidth), short
  // enough that the tile's accumulators stay in L2.
  constexpr int64_t kMaxTile = 4096;
  const ReduceDim k0 = g.kept.back();
  const std::vector<ReduceDim> kept_outer(g.kept.begin(), g.kept.end() - 1);
  const ReduceDim rl = g.reduced.back();
  const std::vector<ReduceDim> red_outer(g.reduced.begin(), g.reduced.end() - 1);
  const int64_t tiles = (k0.size + kMaxTile - 1) / kMaxTile;
  const int64_t tile = (k0.size + tiles - 1) / tiles;
  const int64_t items = g.n_out / k0.size * tiles;
  struct Item {
    const char* in;
    int64_t out;
    int64_t len;
  };
  auto locate = [&](int64_t item, ReduceWalker& ko) {
    ko.seek(item / tiles);
    const int64_t j0 = item % tiles * tile;
    return Item{g.base + ko.in + j0 * k0.in, ko.out + j0 * k0.out, std::min(tile, k0.size - j0)};
  };
  // Folds reduced positions [rb, re) into the item's accumulators, handing the op
  // whole blocks of rows along the innermost reduced dim.
  auto fold = [&](const Item& it, int64_t rb, int64_t re, Acc* acc, ReduceWalker& w) {
    int64_t off = rb % rl.size;
    w.seek(rb / rl.size);
    for (int64_t pos = rb; pos < re; off = 0, w.next()) {
      const int64_t n = std::min(rl.size - off, re - pos);
      op.rows_block(acc, it.in + w.in + off * rl.in, k0.in, it.len, rl.in, n,
                    RunPos{it.out, k0.out, w.ridx + off * rl.ridx, rl.ridx});
      pos += n;
    }
  };
  auto write = [&](const Item& it, Acc* acc) {
    for (int64_t j = 0; j < it.len; ++j) {
      const int64_t o = it.out + j * k0.out;
      out[o] = op.project(acc[j], o);
    }
  };
  const int threads = reduce_threads();
  const int64_t item_work = g.n_red * tile;
  if (items >= 4 * threads || g.n_red < 4 * threads || items * item_work < 2 * kGrainSize) {
    parallel_for(0, items, std::max<int64_t>(1, kGrainSize / item_work), [&](int64_t b, int64_t e) {
      AccBuffer<Acc> acc(static_cast<size_t>(tile), op.identity());
      ReduceWalker ko(kept_outer), w(red_outer);
      for (int64_t item = b; item < e; ++item) {
        const Item it = locate(item, ko);
        std::fill(acc.data(), acc.data() + it.len, op.identity());
        fold(it, 0, g.n_red, acc.data(), w);
        write(it, acc.data());
      }
    });
    return;
  }
  // Few output tiles over many rows: the rows are split among the threads, each with
  // its own accumulators, combined in row order.
  const int64_t chunks = reduce_chunks(items * item_work, kGrainSize, threads);
  const int64_t per = (g.n_red + chunks - 1) / chunks;
  const int64_t stride = items * tile;
  AccBuffer<Acc> part(static_cast<size_t>(chunks * stride), op.identity());
  parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
    ReduceWalker ko(kept_outer), w(red_outer);
    for (int64_t c = cb; c < ce; ++c) {
      for (int64_t item = 0; item < items; ++item) {
        fold(locate(item, ko), c * per, std::min(g.n_red, (c + 1) * per),
             part.data() + c * stride + item * tile, w);
      }
    }
  });
  ReduceWalker ko(kept_outer);
  for (int64_t item = 0; item < items; ++item) {
    const Item it = locate(item, ko);
    Acc* acc = part.data() + item * tile;
    for (int64_t c = 1; c < chunks; ++c) {
      const Acc* pc = part.data() + c * stride + item * tile;
      for (int64_t j = 0; j < it.len; ++j) acc[j] = op.combine(acc[j], pc[j]);
    }
    write(it, acc);
  }
}

// Writes op's result for every output into out[0, g.n_out).
template <typename Op>
void reduce_kernel(const ReduceGeometry& g, const Op& op, typename Op::out_t* out) {
  if (g.n_out == 0) return;
  if (g.n_red == 0) {
    for (int64_t o = 0; o < g.n_out; ++o) out[o] = op.project(op.identity(), o);
    return;
  }
  // Very short runs ([N, 4].sum(1)) cost more in per-output overhead than in work:
  // vectorizing across many neighbouring outputs is cheaper.
  const bool short_runs = !g.kept.empty() && g.reduced.back().size < 16 &&
                          g.kept.back().size >= 64;
  if (g.inner_kept || short_runs) {
    reduce_rows(g, op, out);
  } else {
    reduce_inner(g, op, out);
  }
}

}  // namespace thd::detail
