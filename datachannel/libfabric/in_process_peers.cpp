#include "datachannel/libfabric/in_process_peers.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace thd::detail::libfabric {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::vector<uint8_t>, std::weak_ptr<Lifeline>, std::less<>> by_name;
};

Registry& registry() {
  // Never destroyed: a pipe may outlive static destruction (a channel held by a
  // static), and its lifeline still leaves the registry.
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

bool shares_in_process_peers(std::string_view provider) noexcept { return provider == "shm"; }

std::shared_ptr<Lifeline> Lifeline::enroll(std::vector<uint8_t> name) {
  auto lifeline = std::make_shared<Lifeline>(name);
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  r.by_name[std::move(name)] = lifeline;
  return lifeline;
}

std::shared_ptr<Lifeline> Lifeline::find(std::span<const uint8_t> name) {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  auto it = r.by_name.find(std::vector<uint8_t>(name.begin(), name.end()));
  return it == r.by_name.end() ? nullptr : it->second.lock();
}

size_t Lifeline::enrolled() {
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  return static_cast<size_t>(
      std::count_if(r.by_name.begin(), r.by_name.end(), [](const auto& kv) { return !kv.second.expired(); }));
}

void Lifeline::park(Remains remains) { parked_ = std::make_unique<Remains>(std::move(remains)); }

Lifeline::~Lifeline() {
  if (parked_) {
    parked_->endpoint.close_endpoint();
    parked_->ops.clear();
    parked_.reset();
  }
  Registry& r = registry();
  const std::lock_guard lock(r.mutex);
  auto it = r.by_name.find(name_);
  // Only this lifeline's own entry (expired now): a name is not reused while its
  // endpoint is open, but an entry made since is not this one's to remove.
  if (it != r.by_name.end() && it->second.expired()) r.by_name.erase(it);
}

}  // namespace thd::detail::libfabric
