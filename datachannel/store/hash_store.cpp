// HashStore: one map under one mutex; get/wait sleep on a condition variable that
// every write notifies.
#include <thd/store.h>

#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "datachannel/store/store_util.h"

namespace thd {

using detail::Bytes;
using Clock = std::chrono::steady_clock;

struct HashStore::Impl {
  std::mutex mu;
  std::condition_variable changed;
  detail::KeyMap map;

  std::optional<Bytes> find(const std::string& key) const { return detail::find_key(map, key); }
  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    return detail::missing_keys(map, keys);
  }
};

HashStore::HashStore(std::chrono::milliseconds timeout) : Store(timeout), impl_(std::make_unique<Impl>()) {}

HashStore::~HashStore() = default;

void HashStore::do_set(const std::string& key, const std::vector<uint8_t>& value) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->map[key] = value;
  }
  impl_->changed.notify_all();
}

std::vector<uint8_t> HashStore::do_get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mu);
  const auto deadline = detail::deadline_after(timeout);
  if (!impl_->changed.wait_until(lock, deadline, [&] { return impl_->map.contains(key); })) {
    detail::throw_get_timeout(key, timeout);
  }
  return impl_->map.at(key);
}

int64_t HashStore::do_add(const std::string& key, int64_t delta) {
  int64_t result;
  {
    std::lock_guard lock(impl_->mu);
    result = detail::apply_add(impl_->find(key), delta, key);
    impl_->map[key] = detail::encode_counter(result);
  }
  impl_->changed.notify_all();
  return result;
}

std::vector<uint8_t> HashStore::do_compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                               const std::vector<uint8_t>& desired) {
  detail::CompareSetOutcome outcome;
  {
    std::lock_guard lock(impl_->mu);
    outcome = detail::apply_compare_set(impl_->find(key), expected, desired);
    if (outcome.store) impl_->map[key] = outcome.result;
  }
  if (outcome.store) impl_->changed.notify_all();
  return std::move(outcome.result);
}

void HashStore::do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mu);
  const auto deadline = detail::deadline_after(timeout);
  if (!impl_->changed.wait_until(lock, deadline, [&] { return impl_->missing(keys).empty(); })) {
    detail::throw_wait_timeout(impl_->missing(keys), keys.size(), timeout);
  }
}

bool HashStore::do_check(const std::vector<std::string>& keys) {
  std::lock_guard lock(impl_->mu);
  return impl_->missing(keys).empty();
}

bool HashStore::do_delete_key(const std::string& key) {
  std::lock_guard lock(impl_->mu);
  return impl_->map.erase(key) > 0;
}

int64_t HashStore::do_num_keys() {
  std::lock_guard lock(impl_->mu);
  return static_cast<int64_t>(impl_->map.size());
}

}  // namespace thd
