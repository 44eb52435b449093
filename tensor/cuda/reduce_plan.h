// How a reduction of a CUDA tensor is laid out for the kernels (reduce_kernels.cuh):
// which elements each output folds, and the launch shape that covers them. Host code;
// the plain structs travel to the device as kernel arguments.
#pragma once

#include <cstdint>
#include <vector>

#include <thd/tensor.h>

namespace thd::cuda {

// Every reduction, after dropping size-1 dims and merging dims whose strides chain,
// is read as at most two kept dims and one reduced dim. Output o in [0, n_out) is
// (outer, inner) = (o / inner_size, o % inner_size), enumerated in the input's
// memory order (inner is the kept dim with the smaller stride, so neighbouring
// threads read neighbouring memory); it folds the n_red elements
//   input + outer * outer_in + inner * inner_in + r * red_in,   r in [0, n_red)
// and is written to output[outer * outer_out + inner * inner_out]. Strides are in
// elements. r is also the element's row-major position among the reduced dims, which
// argmax/argmin report.
struct ReduceLayout {
  int64_t n_out = 1;
  int64_t inner_size = 1;
  int64_t outer_in = 0;
  int64_t inner_in = 0;
  int64_t outer_out = 0;
  int64_t inner_out = 0;
  int64_t n_red = 1;
  int64_t red_in = 0;
};

// The reduced dim is the innermost in memory (sum(-1), full reductions): groups of
// `group` threads fold one output each (a whole block when group > 32), `splits`
// groups per output when there are few long outputs, each over `chunk` elements;
// partial results then meet in a second kernel.
struct RowConfig {
  int group = 1;
  int block = 256;
  int grid = 1;
  int64_t splits = 1;
  int64_t chunk = 0;
};

// A kept dim is innermost (sum(0) of [N, M]): threads along x take neighbouring
// outputs, threads along y and `splits` blocks along grid y share the reduced dim.
struct ColumnConfig {
  int block_x = 1;
  int block_y = 1;
  int64_t grid_x = 1;
  int64_t splits = 1;
  int64_t chunk = 0;
};

struct ReducePlan {
  Tensor input;  // what the kernels read: the caller's tensor or a contiguous copy
  ReduceLayout layout;
  bool rows = true;  // RowConfig, else ColumnConfig
  RowConfig row;
  ColumnConfig column;
};

// Lays out the reduction of `in` (a CUDA tensor) over the dims marked in `mask`, the
// result being contiguous in the kept dims' order. `ordered_index`: r must be the
// row-major position among the reduced dims (argmax); other ops allow any order.
// Layouts the kernels cannot read directly (several reduced dims that do not merge)
// are read from a contiguous copy of `in` with the reduced dims last.
ReducePlan plan_reduce(const Tensor& in, const std::vector<bool>& mask, bool ordered_index);

// The column launch for n_out outputs of n_red elements each on `sms` SMs (also
// softmax's shape for a dim that is not innermost).
ColumnConfig column_config(int64_t n_out, int64_t n_red, int64_t sms);

// Streaming multiprocessors of `device` (cached after the first query).
int multiprocessor_count(int device);

// Smallest power of two >= v (1 for v <= 1).
int64_t next_pow2(int64_t v);

}  // namespace thd::cuda
