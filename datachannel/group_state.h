// What a DataChannel object is made of: its members, its transport (shared by
// every group of one channel), its id in the message space, and the sequencing of
// its collectives.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <thd/datachannel.h>

#include "datachannel/channel_access.h"
#include "datachannel/collective_queue.h"
#include "datachannel/device_collectives.h"
#include "datachannel/envelope.h"
#include "datachannel/transport.h"

namespace thd::detail {

// Where `rank` is in `ranks` (a group's world ranks: its group rank), -1 if absent.
inline int position_in(const std::vector<int>& ranks, int rank) {
  const auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

struct GroupState {
  std::string backend;
  std::shared_ptr<Transport> transport;
  // This channel's namespace in the job's store (group ids are agreed there).
  std::shared_ptr<Store> store;
  // Group rank -> world rank.
  std::shared_ptr<const std::vector<int>> world_ranks;
  int rank = -1;  // in the group; -1 outside it
  uint32_t id = 0;
  std::chrono::milliseconds timeout{0};
  // Set by shutdown(); shared by the world group and every group made from it.
  std::shared_ptr<std::atomic<bool>> shut_down = std::make_shared<std::atomic<bool>>(false);
  // The device collectives of a channel whose backend has none of its own, made at
  // its first device tensor; shared by the world group and every group made from
  // it (they key their communicators by group id). Declared after `transport`, so
  // it closes first.
  struct DeviceSlot {
    std::mutex mu;
    std::unique_ptr<DeviceCollectives> collectives;
  };
  std::shared_ptr<DeviceSlot> device = std::make_shared<DeviceSlot>();

  int world_rank() const { return transport ? transport->rank() : -1; }
  int size() const { return static_cast<int>(world_ranks->size()); }

  // The next sequence number of a collective with this tag (issue order).
  uint32_t next_sequence(int64_t tag);
  // The queue collectives with this tag run on.
  CollectiveQueue& queue(int64_t tag);
  // How many groups with exactly these members this channel has made: the k-th
  // such group on one rank is the k-th on every other.
  int count_creation(const std::vector<int>& members);

 private:
  std::mutex mu_;
  std::map<int64_t, uint32_t> sequences_;
  std::map<int64_t, std::unique_ptr<CollectiveQueue>> queues_;
  std::map<std::vector<int>, int> creations_;
};

}  // namespace thd::detail
