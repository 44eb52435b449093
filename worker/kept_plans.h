// What a graph's replays worked out for their elementwise commands (docs/graphs.md,
// "Replays"): a command that wrote its result into the tensor the previous replay
// left (worker/replay_into.h) on the flat path keeps that plan (where the flat run
// starts in each tensor, the element count, the typed kernel) with the handle-table
// entries of its tensors and what each held. A later replay whose command finds the
// same entries holding the same storages in the same layouts, none poisoned, runs
// the kept kernel and nothing else: no lookups, no dtype promotion, no overlap
// checks, no planning. Anything else (an entry erased, a tensor re-made, a poison)
// takes the command's usual path, which keeps a new plan when it can.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <thd/tensor.h>

#include "tensor/into.h"
#include "worker/handle_table.h"

namespace thd::worker {

class KeptPlans {
 public:
  explicit KeptPlans(size_t commands) : commands_(commands) {}

  // Runs command `index`'s kept plan when its tensors are what they were when it
  // was kept: true when it ran, false (nothing done) when the command is to take
  // its usual path. Only the command loop calls it, for a replay it runs itself.
  bool run(size_t index, const HandleTable& table);
  // Keeps `plan`, which command `index` ran to write tensor ids[0] from ids[1] and
  // ids[2] (0 for a number b, which the plan holds), for that command's next replays.
  void keep(size_t index, const HandleTable& table, const std::array<uint64_t, 3>& ids,
            const detail::FlatBinary& plan);

 private:
  // A tensor as the plan saw it: the storage's memory and the layout over it. (The
  // memory, not the storage object: a tensor re-made in memory at the same address
  // and in the same layout is read and written exactly as the plan does.) Plans are
  // kept for tensors of up to kMaxDims dims, held here without an allocation.
  static constexpr size_t kMaxDims = 4;
  struct Operand {
    uint64_t id = 0;
    const Entry* entry = nullptr;
    const void* data = nullptr;
    int64_t offset = 0;
    DType dtype = kFloat32;
    uint8_t dims = 0;
    std::array<int64_t, kMaxDims> shape{};
    std::array<int64_t, kMaxDims> strides{};
  };
  struct Plan {
    bool valid = false;
    uint64_t erasures = 0;  // the table's count when the entries were found
    std::array<Operand, 3> operands;
    uint8_t count = 0;  // of operands: 2 with a number b
    detail::FlatBinary flat{};
  };
  static bool unchanged(const Operand& o);
  static bool take(Operand& o, const Entry* e);
  // After the table erased entries: the operands' entries found again.
  static bool refind(Plan& plan, const HandleTable& table);

  size_t commands_;
  std::vector<Plan> plans_;  // one per command, once one kept a plan
};

// How many commands ran a kept plan in this process (all sessions): for tests.
uint64_t kept_plan_runs();

}  // namespace thd::worker
