#include "worker/stream_check.h"

#include <cstdlib>
#include <string>

#include "tensor/check.h"

namespace thd::worker {

std::unique_ptr<StreamCheck> StreamCheck::from_env(int node) {
  const char* v = std::getenv("THD_STREAM_CHECK");
  if (v == nullptr || std::string(v).empty() || std::string(v) == "0") return nullptr;
  if (std::string(v) != "1") {
    THD_THROW(ValueError, "THD_STREAM_CHECK", "THD_STREAM_CHECK must be 1 (check) or 0 (do not), not '{}'", v);
  }
  return std::make_unique<StreamCheck>(node);
}

std::optional<streams::Access> StreamCheck::access_of(const Tensor& t, uint64_t id, bool write) {
  if (!t.defined() || t.numel() == 0) return std::nullopt;
  int64_t low = t.storage_offset();
  int64_t high = t.storage_offset();
  for (size_t d = 0; d < t.shape().size(); ++d) {
    const int64_t reach = (t.shape()[d] - 1) * t.strides()[d];
    if (reach < 0) low += reach;
    else high += reach;
  }
  const auto item = static_cast<int64_t>(t.element_size());
  return streams::Access{reinterpret_cast<uint64_t>(t.storage().get()), low * item, (high + 1) * item, write, id};
}

void StreamCheck::defined(const Tensor& t) {
  if (t.defined() && t.storage().use_count() == 1) checker_.forget(reinterpret_cast<uint64_t>(t.storage().get()));
}

}  // namespace thd::worker
