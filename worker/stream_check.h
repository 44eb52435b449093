// THD_STREAM_CHECK=1: the worker reports a tensor written on one stream and read or
// written on another with no event wait in between (docs/streams.md, "Hazard
// checker"). The adapter between the worker's ops and streams::HazardChecker.
#pragma once

#include <memory>
#include <optional>

#include <thd/tensor.h>

#include "streams/hazard_checker.h"

namespace thd::worker {

class StreamCheck {
 public:
  explicit StreamCheck(int node) : node_(node) {}
  // Enabled by THD_STREAM_CHECK=1 (anything else but 0/unset: ValueError at start).
  static std::unique_ptr<StreamCheck> from_env(int node);

  streams::StreamKey key(uint32_t stream) const { return {node_, stream}; }
  streams::HazardChecker& checker() { return checker_; }
  // The bytes an op touches through `t` (its storage and byte span); nullopt for an
  // empty or undefined tensor.
  static std::optional<streams::Access> access_of(const Tensor& t, uint64_t id, bool write);
  // A tensor defined by an op: a storage nobody else holds is new memory, whatever
  // history its address had.
  void defined(const Tensor& t);

 private:
  const int node_;
  streams::HazardChecker checker_;
};

}  // namespace thd::worker
