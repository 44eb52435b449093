// The list forms of the collectives (collective_lists.h): checks that name the
// list and the position, then thd's algorithms over staging buffers, one
// collective on the group's sequence each.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>
#include <string>

#include "datachannel/channel_util.h"
#include "datachannel/check.h"
#include "datachannel/collective_launch.h"
#include "datachannel/collective_lists.h"
#include "datachannel/collectives/algorithms.h"
#include "datachannel/collectives/reduce_kernels.h"

namespace thd::detail {

namespace {

using Buffer = std::shared_ptr<std::vector<uint8_t>>;

uint8_t* bytes_of(const Tensor& t) { return static_cast<uint8_t*>(t.numel() == 0 ? nullptr : t.data_ptr()); }

std::string entry(std::string_view list, size_t i) { return fmt::format("{}[{}]", list, i); }

void check_length(const GroupState& g, std::string_view op, std::string_view list, size_t got, std::string_view why) {
  if (got == static_cast<size_t>(g.size())) return;
  THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1, "{} has {} tensors but must have {} ({})", list, got,
               g.size(), why);
}

// A list entry: defined, on the CPU, of `dtype`, and of `numel` elements unless
// that is -1; contiguous when it is written.
void check_entry(const GroupState& g, std::string_view op, std::string_view list, size_t i, const Tensor& t,
                 DType dtype, std::string_view dtype_of, int64_t numel, std::string_view numel_rule, bool written) {
  const std::string what = entry(list, i);
  check_tensor(g, t, op, what, written);
  if (t.dtype() != dtype) {
    THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1, "{} is {} but {} is {}; every tensor needs one dtype",
                 what, dtype_name(t.dtype()), dtype_of, dtype_name(dtype));
  }
  if (numel >= 0 && t.numel() != numel) {
    THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1, "{} has {} elements (shape {}) but must have {} ({})",
                 what, t.numel(), t.shape(), numel, numel_rule);
  }
}

void check_empty_off_root(const GroupState& g, std::string_view op, std::string_view list, size_t got, int root,
                          std::string_view role) {
  if (got == 0) return;
  THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1,
               "{} has {} tensors on a rank that is not the {} (group rank {} is); pass an empty list here", list,
               got, role, root);
}

// An input the algorithm reads while the outputs are written: a private copy when
// it shares memory with one of them.
Tensor readable(const Tensor& input, const std::vector<Tensor>& outputs) {
  for (const Tensor& out : outputs) {
    if (out.defined() && input.shares_storage(out)) return input.clone();
  }
  return input.contiguous();
}

// The list's tensors one after another in one buffer, taken at the call (the
// caller may reuse them as soon as the call returns).
Buffer packed(const std::vector<Tensor>& list) {
  size_t total = 0;
  for (const Tensor& t : list) total += t.nbytes();
  auto buffer = std::make_shared<std::vector<uint8_t>>(total);
  size_t at = 0;
  for (const Tensor& t : list) {
    const Tensor c = t.contiguous();
    if (c.nbytes() != 0) std::memcpy(buffer->data() + at, c.data_ptr(), c.nbytes());
    at += c.nbytes();
  }
  return buffer;
}

MessageKind list_kind(MessageOp op, DType dtype, uint64_t count = 0, int root = -1, ReduceOp reduce = ReduceOp::Sum) {
  return {op, static_cast<uint8_t>(dtype), static_cast<uint8_t>(reduce), root, count};
}

// Block j of `sends` goes to rank j; block j of `recvs` comes from rank j. Pairwise:
// at step s, rank r sends to r+s and receives from r-s, so every pair meets once.
void exchange(Comm& c, const std::vector<std::span<const uint8_t>>& sends, const std::vector<std::span<uint8_t>>& recvs) {
  const int n = c.size();
  const int r = c.rank();
  const auto mine = static_cast<size_t>(r);
  if (!sends[mine].empty()) std::memcpy(recvs[mine].data(), sends[mine].data(), sends[mine].size());
  for (int s = 1; s < n; ++s) {
    const auto dst = static_cast<size_t>((r + s) % n);
    const auto src = static_cast<size_t>((r - s + n) % n);
    c.sendrecv(sends[dst], static_cast<int>(dst), recvs[src], static_cast<int>(src));
  }
}

std::vector<Tensor> with(std::vector<Tensor> list, const Tensor& extra) {
  list.push_back(extra);
  return list;
}

}  // namespace

Request all_gather_list(GroupState& g, const std::vector<Tensor>& outputs, const Tensor& input,
                        const CollectiveOptions& o, bool blocking) {
  const char* op = "all_gather";
  check_member(g, op);
  check_tensor(g, input, op, "input", false);
  check_length(g, op, "tensor_list", outputs.size(), "one per rank of the group");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const bool mine = static_cast<int>(i) == g.rank;
    check_entry(g, op, "tensor_list", i, outputs[i], input.dtype(), "the input", mine ? input.numel() : -1,
                "this rank's entry takes its own input", true);
  }
  const Tensor src = readable(input, outputs);
  const size_t element = element_size(input.dtype());
  return launch_collective(
      g, list_kind(MessageOp::AllGather, input.dtype()), o, with(outputs, src),
      [=](Comm& c) {
        const auto n = static_cast<size_t>(c.size());
        // Each rank's size first: the data then moves in blocks of the largest,
        // which every rank knows whatever its list says.
        std::vector<int64_t> counts(n);
        const int64_t own = src.numel();
        all_gather(c, &own, counts.data(), sizeof own);
        const auto block = static_cast<size_t>(*std::max_element(counts.begin(), counts.end())) * element;
        std::vector<uint8_t> padded(block);
        if (src.nbytes() != 0) std::memcpy(padded.data(), src.data_ptr(), src.nbytes());
        std::vector<uint8_t> stage(n * block);
        all_gather(c, padded.data(), stage.data(), block);
        for (size_t i = 0; i < n; ++i) {
          if (outputs[i].numel() != counts[i]) {
            THD_THROW_AT(ValueError, op, c.transport().rank(), c.world_ranks()[i],
                         "tensor_list[{}] has {} elements (shape {}) but group rank {} sent {}; nothing was written",
                         i, outputs[i].numel(), outputs[i].shape(), i, counts[i]);
          }
        }
        for (size_t i = 0; i < n; ++i) {
          if (outputs[i].numel() != 0) std::memcpy(bytes_of(outputs[i]), stage.data() + i * block, outputs[i].nbytes());
        }
      },
      blocking);
}

Request gather_list(GroupState& g, const Tensor& input, const std::vector<Tensor>& outputs, int root,
                    const CollectiveOptions& o, bool blocking) {
  const char* op = "gather";
  check_member(g, op);
  check_rank(g, root, op, "root");
  check_tensor(g, input, op, "input", false);
  const bool is_root = g.rank == root;
  if (is_root) {
    check_length(g, op, "gather_list", outputs.size(), "one per rank of the group, on the destination");
    for (size_t i = 0; i < outputs.size(); ++i) {
      check_entry(g, op, "gather_list", i, outputs[i], input.dtype(), "the input", input.numel(),
                  "as many as the input", true);
    }
  } else {
    check_empty_off_root(g, op, "gather_list", outputs.size(), root, "destination");
  }
  const Tensor src = readable(input, outputs);
  const size_t block = src.nbytes();
  return launch_collective(
      g, list_kind(MessageOp::Gather, input.dtype(), static_cast<uint64_t>(input.numel()), root), o,
      with(outputs, src),
      [=](Comm& c) {
        std::vector<uint8_t> stage(is_root ? static_cast<size_t>(c.size()) * block : 0);
        gather(c, bytes_of(src), is_root ? stage.data() : nullptr, block, root);
        if (!is_root || block == 0) return;
        for (size_t i = 0; i < outputs.size(); ++i) std::memcpy(bytes_of(outputs[i]), stage.data() + i * block, block);
      },
      blocking);
}

Request scatter_list(GroupState& g, const Tensor& output, const std::vector<Tensor>& inputs, int root,
                     const CollectiveOptions& o, bool blocking) {
  const char* op = "scatter";
  check_member(g, op);
  check_rank(g, root, op, "root");
  check_tensor(g, output, op, "output", true);
  const bool is_root = g.rank == root;
  Buffer stage;
  if (is_root) {
    check_length(g, op, "scatter_list", inputs.size(), "one per rank of the group, on the source");
    for (size_t i = 0; i < inputs.size(); ++i) {
      check_entry(g, op, "scatter_list", i, inputs[i], output.dtype(), "the output", output.numel(),
                  "as many as the output", false);
    }
    stage = packed(inputs);
  } else {
    check_empty_off_root(g, op, "scatter_list", inputs.size(), root, "source");
  }
  const size_t block = output.nbytes();
  return launch_collective(
      g, list_kind(MessageOp::Scatter, output.dtype(), static_cast<uint64_t>(output.numel()), root), o, {output},
      [=](Comm& c) { scatter(c, stage ? stage->data() : nullptr, bytes_of(output), block, root); }, blocking);
}

Request reduce_scatter_list(GroupState& g, const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp rop,
                            const CollectiveOptions& o, bool blocking) {
  const char* op = "reduce_scatter";
  check_member(g, op);
  check_tensor(g, output, op, "output", true);
  check_reduce_op(output.dtype(), rop, op);
  check_length(g, op, "input_list", inputs.size(), "one per rank of the group");
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_entry(g, op, "input_list", i, inputs[i], output.dtype(), "the output", output.numel(),
                "as many as the output", false);
  }
  const Buffer stage = packed(inputs);
  const DType dtype = output.dtype();
  const auto count = static_cast<size_t>(output.numel());
  return launch_collective(
      g, list_kind(MessageOp::ReduceScatter, dtype, count, -1, rop), o, {output},
      [=](Comm& c) { reduce_scatter(c, stage->data(), bytes_of(output), count, dtype, rop); }, blocking);
}

Request all_to_all_list(GroupState& g, const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                        const CollectiveOptions& o, bool blocking) {
  const char* op = "all_to_all";
  check_member(g, op);
  check_length(g, op, "input_tensor_list", inputs.size(), "one per rank of the group");
  check_length(g, op, "output_tensor_list", outputs.size(), "one per rank of the group");
  check_tensor(g, inputs[0], op, "input_tensor_list[0]", false);
  const DType dtype = inputs[0].dtype();
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_entry(g, op, "input_tensor_list", i, inputs[i], dtype, "input_tensor_list[0]", -1, "", false);
    check_entry(g, op, "output_tensor_list", i, outputs[i], dtype, "input_tensor_list[0]", -1, "", true);
  }
  const auto mine = static_cast<size_t>(g.rank);
  if (outputs[mine].numel() != inputs[mine].numel()) {
    THD_THROW_AT(ValueError, op, g.world_rank(), -1,
                 "output_tensor_list[{0}] has {1} elements but input_tensor_list[{0}] has {2}: this rank's own "
                 "block goes from one to the other",
                 mine, outputs[mine].numel(), inputs[mine].numel());
  }
  std::vector<Tensor> sources;
  for (const Tensor& in : inputs) sources.push_back(readable(in, outputs));
  std::vector<Tensor> keep = outputs;
  keep.insert(keep.end(), sources.begin(), sources.end());
  return launch_collective(
      g, list_kind(MessageOp::AllToAll, dtype), o, std::move(keep),
      [=](Comm& c) {
        std::vector<std::span<const uint8_t>> sends;
        std::vector<std::span<uint8_t>> recvs;
        for (const Tensor& s : sources) sends.emplace_back(bytes_of(s), s.nbytes());
        for (const Tensor& r : outputs) recvs.emplace_back(bytes_of(r), r.nbytes());
        exchange(c, sends, recvs);
      },
      blocking);
}

namespace {

// The rows of a dim-0 split, one entry per rank: the given list checked, or equal parts.
std::vector<int64_t> split_rows(const GroupState& g, std::string_view op, std::string_view name, const Tensor& t,
                                std::string_view what, const std::vector<int64_t>& splits) {
  const int64_t rows = t.size(0);
  const int n = g.size();
  if (splits.empty()) {
    if (rows % n != 0) {
      THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1,
                   "{} has {} rows (dim 0), which do not split into {} equal parts; pass {}", what, rows, n, name);
    }
    return std::vector<int64_t>(static_cast<size_t>(n), rows / n);
  }
  check_length(g, op, name, splits.size(), "one per rank of the group");
  for (size_t i = 0; i < splits.size(); ++i) {
    if (splits[i] < 0) {
      THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1, "{}[{}] is {}; split sizes must be >= 0", name, i,
                   splits[i]);
    }
  }
  const int64_t total = std::accumulate(splits.begin(), splits.end(), int64_t{0});
  if (total != rows) {
    THD_THROW_AT(ValueError, std::string(op), g.world_rank(), -1,
                 "{} adds up to {} rows but {} has {} (dim 0 of shape {})", name, total, what, rows, t.shape());
  }
  return splits;
}

}  // namespace

Request all_to_all_single(GroupState& g, const Tensor& output, const Tensor& input,
                          const std::vector<int64_t>& output_splits, const std::vector<int64_t>& input_splits,
                          const CollectiveOptions& o, bool blocking) {
  const char* op = "all_to_all_single";
  check_member(g, op);
  check_tensor(g, input, op, "input", false);
  check_tensor(g, output, op, "output", true);
  if (output.dtype() != input.dtype()) {
    THD_THROW_AT(ValueError, op, g.world_rank(), -1, "output is {} but input is {}; they must match",
                 dtype_name(output.dtype()), dtype_name(input.dtype()));
  }
  if (input.dim() == 0 || output.dim() == 0) {
    THD_THROW_AT(ValueError, op, g.world_rank(), -1, "{} is a scalar (0-d); the split is along dim 0",
                 input.dim() == 0 ? "input" : "output");
  }
  const auto row_elements = [](const Tensor& t) {
    int64_t r = 1;
    for (size_t d = 1; d < t.shape().size(); ++d) r *= t.shape()[d];
    return r;
  };
  const int64_t row = row_elements(input);
  if (row_elements(output) != row) {
    THD_THROW_AT(ValueError, op, g.world_rank(), -1,
                 "a row (dim 0) of the output has {} elements (shape {}) but one of the input has {} (shape {})",
                 row_elements(output), output.shape(), row, input.shape());
  }
  const std::vector<int64_t> in_rows = split_rows(g, op, "input_split_sizes", input, "the input", input_splits);
  const std::vector<int64_t> out_rows = split_rows(g, op, "output_split_sizes", output, "the output", output_splits);
  const auto mine = static_cast<size_t>(g.rank);
  if (in_rows[mine] != out_rows[mine]) {
    THD_THROW_AT(ValueError, op, g.world_rank(), -1,
                 "output_split_sizes[{0}] is {1} rows but input_split_sizes[{0}] is {2}: this rank's own rows go from "
                 "one to the other",
                 mine, out_rows[mine], in_rows[mine]);
  }
  const Tensor src = readable(input, {output});
  const size_t row_bytes = static_cast<size_t>(row) * element_size(input.dtype());
  return launch_collective(
      g, list_kind(MessageOp::AllToAll, input.dtype()), o, {output, src},
      [=](Comm& c) {
        std::vector<std::span<const uint8_t>> sends;
        std::vector<std::span<uint8_t>> recvs;
        size_t in_at = 0;
        size_t out_at = 0;
        for (size_t j = 0; j < in_rows.size(); ++j) {
          const size_t in_bytes = static_cast<size_t>(in_rows[j]) * row_bytes;
          const size_t out_bytes = static_cast<size_t>(out_rows[j]) * row_bytes;
          sends.emplace_back(in_bytes == 0 ? nullptr : bytes_of(src) + in_at, in_bytes);
          recvs.emplace_back(out_bytes == 0 ? nullptr : bytes_of(output) + out_at, out_bytes);
          in_at += in_bytes;
          out_at += out_bytes;
        }
        exchange(c, sends, recvs);
      },
      blocking);
}

}  // namespace thd::detail
