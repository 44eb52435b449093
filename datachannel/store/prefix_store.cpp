#include <thd/store.h>

#include "datachannel/check.h"

namespace thd {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : Store(store ? store->timeout() : kDefaultStoreTimeout), prefix_(std::move(prefix)), store_(std::move(store)) {
  THD_CHECK(store_ != nullptr, ValueError, "PrefixStore", "the underlying store is null (prefix '{}')", prefix_);
}

PrefixStore::~PrefixStore() = default;

std::string PrefixStore::prefixed(const std::string& key) const { return prefix_ + "/" + key; }

std::vector<std::string> PrefixStore::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(prefixed(k));
  return out;
}

void PrefixStore::do_set(const std::string& key, const std::vector<uint8_t>& value) {
  store_->set(prefixed(key), value);
}

std::vector<uint8_t> PrefixStore::do_get(const std::string& key, std::chrono::milliseconds timeout) {
  return store_->get(prefixed(key), timeout);
}

int64_t PrefixStore::do_add(const std::string& key, int64_t delta) { return store_->add(prefixed(key), delta); }

std::vector<uint8_t> PrefixStore::do_compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                                 const std::vector<uint8_t>& desired) {
  return store_->compare_set(prefixed(key), expected, desired);
}

void PrefixStore::do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  store_->wait(prefixed(keys), timeout);
}

bool PrefixStore::do_check(const std::vector<std::string>& keys) { return store_->check(prefixed(keys)); }

bool PrefixStore::do_delete_key(const std::string& key) { return store_->delete_key(prefixed(key)); }

int64_t PrefixStore::do_num_keys() { return store_->num_keys(); }

}  // namespace thd
