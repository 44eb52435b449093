#include "worker/kept_plans.h"

#include <atomic>

namespace thd::worker {

namespace {

std::atomic<uint64_t> runs{0};

}  // namespace

uint64_t kept_plan_runs() { return runs.load(std::memory_order_relaxed); }

bool KeptPlans::unchanged(const Operand& o) {
  const Entry& e = *o.entry;
  if (e.poison || !e.tensor.defined()) return false;
  const Tensor& t = e.tensor;
  if (t.storage()->data() != o.data || t.storage_offset() != o.offset || t.dtype() != o.dtype) return false;
  const Shape& shape = t.shape();
  if (shape.size() != o.dims) return false;
  const Shape& strides = t.strides();
  for (size_t d = 0; d < o.dims; ++d) {
    if (shape[d] != o.shape[d] || strides[d] != o.strides[d]) return false;
  }
  return true;
}

bool KeptPlans::take(Operand& o, const Entry* e) {
  if (e == nullptr || e->poison || !e->tensor.defined()) return false;
  const Tensor& t = e->tensor;
  if (t.shape().size() > kMaxDims) return false;
  o.entry = e;
  o.data = t.storage()->data();
  o.offset = t.storage_offset();
  o.dtype = t.dtype();
  o.dims = static_cast<uint8_t>(t.shape().size());
  for (size_t d = 0; d < o.dims; ++d) {
    o.shape[d] = t.shape()[d];
    o.strides[d] = t.strides()[d];
  }
  return true;
}

bool KeptPlans::refind(Plan& plan, const HandleTable& table) {
  // The count first: an erasure after it, before the lookups, shows as a change.
  const uint64_t erasures = table.erasures();
  for (size_t k = 0; k < plan.count; ++k) {
    Operand& o = plan.operands[k];
    o.entry = table.find(o.id);
    if (o.entry == nullptr) {
      plan.valid = false;
      return false;
    }
  }
  plan.erasures = erasures;
  return true;
}

bool KeptPlans::run(size_t index, const HandleTable& table) {
  if (index >= plans_.size()) return false;
  Plan& plan = plans_[index];
  if (!plan.valid) return false;
  // The entries' addresses hold while the table erases nothing (worker/graphs.h);
  // after an erasure (a free elsewhere, between replays) they are found again.
  if (plan.erasures != table.erasures() && !refind(plan, table)) return false;
  for (size_t k = 0; k < plan.count; ++k) {
    if (!unchanged(plan.operands[k])) return false;
  }
  plan.flat.run();
  runs.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void KeptPlans::keep(size_t index, const HandleTable& table, const std::array<uint64_t, 3>& ids,
                     const detail::FlatBinary& flat) {
  if (index >= commands_) return;
  if (plans_.empty()) plans_.resize(commands_);
  Plan& plan = plans_[index];
  plan.valid = false;
  plan.erasures = table.erasures();
  plan.count = ids[2] != 0 ? 3 : 2;
  for (size_t k = 0; k < plan.count; ++k) {
    plan.operands[k].id = ids[k];
    if (!take(plan.operands[k], table.find(ids[k]))) return;
  }
  plan.flat = flat;
  plan.valid = true;
}

}  // namespace thd::worker
