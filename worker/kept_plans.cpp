#include "worker/kept_plans.h"

#include <atomic>

namespace thd::worker {

namespace {

std::atomic<uint64_t> runs{0};

bool same(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

}  // namespace

uint64_t kept_plan_runs() { return runs.load(std::memory_order_relaxed); }

bool KeptPlans::unchanged(const Operand& o) {
  const Entry& e = *o.entry;
  if (e.poison || !e.tensor.defined()) return false;
  const Tensor& t = e.tensor;
  return t.storage()->data() == o.data && t.storage_offset() == o.offset && t.dtype() == o.dtype &&
         same(t.shape(), o.shape) && same(t.strides(), o.strides);
}

bool KeptPlans::run(size_t index, const HandleTable& table) {
  if (index >= plans_.size()) return false;
  Plan& plan = plans_[index];
  // The entries' addresses hold while the table erases nothing (worker/graphs.h).
  if (!plan.valid || plan.erasures != table.erasures()) return false;
  for (const Operand& o : plan.operands) {
    if (!unchanged(o)) return false;
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
  // The count first: an erasure after it, before the lookups, shows as a change.
  plan.erasures = table.erasures();
  for (size_t k = 0; k < ids.size(); ++k) {
    const Entry* e = table.find(ids[k]);
    if (e == nullptr || e->poison || !e->tensor.defined()) return;
    const Tensor& t = e->tensor;
    plan.operands[k] = Operand{e, t.storage()->data(), t.storage_offset(), t.dtype(), t.shape(), t.strides()};
  }
  plan.flat = flat;
  plan.valid = true;
}

}  // namespace thd::worker
