// The byte-level object collectives (include/thd/object_collectives.h): sizes
// travel first, so every member knows how many bytes each value has before they
// move, then the bytes in one collective.
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include <thd/object_collectives.h>

#include "datachannel/check.h"

namespace thd::detail {

namespace {

std::shared_ptr<ProcessGroup> resolve(const Group& group) { return group ? group : default_group(); }

Tensor tensor_of(const ObjectBytes& bytes, int64_t size) {
  Tensor t = Tensor::zeros({size}, kUInt8);
  if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

ObjectBytes bytes_of(const Tensor& t, int64_t size) {
  const auto* p = static_cast<const uint8_t*>(size == 0 ? nullptr : t.data_ptr());
  return p == nullptr ? ObjectBytes{} : ObjectBytes(p, p + size);
}

int64_t* sizes_of(const Tensor& t) { return static_cast<int64_t*>(t.data_ptr()); }

Tensor one_size(size_t n) { return Tensor::from_vector(std::vector<int64_t>{static_cast<int64_t>(n)}); }

// Every member's size, in group-rank order.
std::vector<int64_t> all_sizes(size_t mine, const Group& group, int members) {
  Tensor sizes = Tensor::zeros({members}, kInt64);
  thd::all_gather(sizes, one_size(mine), group);
  return {sizes_of(sizes), sizes_of(sizes) + members};
}

}  // namespace

void throw_bad_object_size(const char* type, size_t expected, size_t got) {
  THD_THROW(ValueError, "ObjectCodec::decode", "{} takes {} bytes but {} arrived", type, expected, got);
}

bool is_this_rank(const Group& group, int global_rank, const char* op) {
  const auto g = resolve(group);
  if (!g->is_member()) {
    THD_THROW(ValueError, op, "this process is not a member of the group (its members are global ranks {})",
              fmt::join(g->world_ranks(), ", "));
  }
  return g->world_ranks()[static_cast<size_t>(g->rank())] == global_rank;
}

void broadcast_object_bytes(ObjectBytes& bytes, int src, const Group& group) {
  const bool is_src = is_this_rank(group, src, "broadcast_object");
  Tensor size = one_size(is_src ? bytes.size() : 0);
  thd::broadcast(size, src, group);
  const int64_t n = sizes_of(size)[0];
  Tensor data = is_src ? tensor_of(bytes, n) : Tensor::zeros({n}, kUInt8);
  thd::broadcast(data, src, group);
  if (!is_src) bytes = bytes_of(data, n);
}

std::vector<ObjectBytes> all_gather_object_bytes(const ObjectBytes& bytes, const Group& group) {
  const auto g = resolve(group);
  const std::vector<int64_t> sizes = all_sizes(bytes.size(), group, g->size());
  std::vector<Tensor> outputs;
  for (int64_t s : sizes) outputs.push_back(Tensor::zeros({s}, kUInt8));
  thd::all_gather(outputs, tensor_of(bytes, static_cast<int64_t>(bytes.size())), group);
  std::vector<ObjectBytes> out;
  for (size_t i = 0; i < sizes.size(); ++i) out.push_back(bytes_of(outputs[i], sizes[i]));
  return out;
}

std::vector<ObjectBytes> gather_object_bytes(const ObjectBytes& bytes, int dst, const Group& group) {
  const auto g = resolve(group);
  const bool is_dst = is_this_rank(group, dst, "gather_object");
  const std::vector<int64_t> sizes = all_sizes(bytes.size(), group, g->size());
  // gather moves equal blocks: every value padded to the largest.
  const int64_t block = *std::max_element(sizes.begin(), sizes.end());
  std::vector<Tensor> outputs;
  if (is_dst) {
    for (size_t i = 0; i < sizes.size(); ++i) outputs.push_back(Tensor::zeros({block}, kUInt8));
  }
  thd::gather(tensor_of(bytes, block), outputs, dst, group);
  std::vector<ObjectBytes> out;
  for (size_t i = 0; i < outputs.size(); ++i) out.push_back(bytes_of(outputs[i], sizes[i]));
  return out;
}

ObjectBytes scatter_object_bytes(const std::vector<ObjectBytes>& inputs, int src, const Group& group) {
  const auto g = resolve(group);
  const int n = g->size();
  const bool is_src = is_this_rank(group, src, "scatter_object");
  // The sizes go first from src; -1 in every one says src's list was wrong, so
  // every member fails at once instead of waiting for bytes that never come.
  Tensor sizes = Tensor::full({n}, -1, kInt64);
  const bool bad_list = is_src && inputs.size() != static_cast<size_t>(n);
  if (is_src && !bad_list) {
    for (int i = 0; i < n; ++i) sizes_of(sizes)[i] = static_cast<int64_t>(inputs[static_cast<size_t>(i)].size());
  }
  thd::broadcast(sizes, src, group);
  if (bad_list) {
    THD_THROW(ValueError, "scatter_object", "scatter_object_input_list has {} objects but must have {} (one per member)",
              inputs.size(), n);
  }
  const std::vector<int64_t> all(sizes_of(sizes), sizes_of(sizes) + n);
  if (all[0] < 0) {
    THD_THROW(ValueError, "scatter_object",
              "the source, global rank {}, gave a scatter_object_input_list of the wrong length", src);
  }
  const int64_t block = *std::max_element(all.begin(), all.end());
  Tensor stage;
  if (is_src) {
    stage = Tensor::zeros({n * block}, kUInt8);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].empty()) {
        std::memcpy(static_cast<uint8_t*>(stage.data_ptr()) + i * static_cast<size_t>(block), inputs[i].data(),
                    inputs[i].size());
      }
    }
  }
  Tensor mine = Tensor::zeros({block}, kUInt8);
  thd::scatter(mine, stage, src, group);
  return bytes_of(mine, all[static_cast<size_t>(g->rank())]);
}

}  // namespace thd::detail
