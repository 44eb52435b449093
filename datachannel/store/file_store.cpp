// FileStore: an append-only log of operations in one file, as torch's FileStore.
//
//   file   := header record*
//   header := "THDFST01" file_id[16]                               24 bytes
//   record := kind[1] key_len[4, LE] key value_len[4, LE] value
//   kind   := 1 set | 2 delete | 3 finished (a FileStore was destroyed)
//
// Writers append under an exclusive flock, readers read under a shared one. Each
// FileStore object caches the map the log describes and the offset it has applied,
// so an operation reads only what other processes appended since its last one.
// Waits poll with backoff (there is no cross-process notification on a plain file).
// A record cut short by a writer that died mid-append is ignored by readers and
// cut off by the next writer, so one crash cannot poison the file. The random
// file_id tells a cache that the file at the path was replaced (removed and
// created again): inode numbers are reused too quickly to tell.
#include <thd/store.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "datachannel/check.h"
#include "datachannel/net/auth.h"
#include "datachannel/net/fd.h"
#include "datachannel/store/store_util.h"
#include "tensor/log.h"

namespace thd {
namespace {

using detail::Bytes;
using net::UniqueFd;
using Clock = std::chrono::steady_clock;

constexpr char kMagic[8] = {'T', 'H', 'D', 'F', 'S', 'T', '0', '1'};
constexpr size_t kFileIdBytes = 16;
constexpr size_t kHeaderBytes = sizeof(kMagic) + kFileIdBytes;
using FileId = std::array<uint8_t, kFileIdBytes>;
enum class Kind : uint8_t { Set = 1, Delete = 2, Finished = 3 };

std::string errno_text(int err) { return std::system_category().message(err); }

void put_u32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{p[i]} << (8 * i);
  return v;
}

// Poll intervals for get/wait: quick at first (the key is often about to appear),
// then backing off so a long wait does not hammer the file lock.
class Backoff {
 public:
  void sleep_until_at_most(Clock::time_point deadline) {
    const auto now = Clock::now();
    if (now >= deadline) return;
    std::this_thread::sleep_for(std::min<Clock::duration>(delay_, deadline - now));
    delay_ = std::min(delay_ * 2, std::chrono::milliseconds(50));
  }

 private:
  std::chrono::milliseconds delay_{1};
};

}  // namespace

struct FileStore::Impl {
  std::string path;
  int world_size;

  // Serializes this object's callers: they share the cache below.
  std::mutex mu;
  std::optional<FileId> file_id;  // of the file `map` describes
  off_t offset = 0;                // how much of that file `map` reflects
  detail::KeyMap map;
  int64_t finished = 0;

  Impl(std::string p, int ws) : path(std::move(p)), world_size(ws) {}

  void reset_cache(std::optional<FileId> id) {
    file_id = id;
    offset = id ? static_cast<off_t>(kHeaderBytes) : 0;
    map.clear();
    finished = 0;
  }

  // Opens (creating, mode 0600) and locks the file; closing the fd unlocks it.
  UniqueFd open_locked(bool exclusive, const char* op) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600));
    if (!fd) {
      int err = errno;
      THD_THROW(ConnectionError, op, "cannot open the store file '{}': {}", path, errno_text(err));
    }
    int rc;
    do {
      rc = ::flock(fd.get(), exclusive ? LOCK_EX : LOCK_SH);
    } while (rc != 0 && errno == EINTR);
    THD_CHECK(rc == 0, ConnectionError, op, "cannot lock the store file '{}': {}", path, errno_text(errno));
    return fd;
  }

  void pread_all(int fd, uint8_t* data, size_t n, off_t at, const char* op) {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd, data + done, n - done, at + static_cast<off_t>(done));
      if (r < 0 && errno == EINTR) continue;
      THD_CHECK(r > 0, ConnectionError, op, "cannot read the store file '{}': {}", path,
                r == 0 ? std::string("it shrank while locked") : errno_text(errno));
      done += static_cast<size_t>(r);
    }
  }

  void pwrite_all(int fd, const uint8_t* data, size_t n, off_t at, const char* op) {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pwrite(fd, data + done, n - done, at + static_cast<off_t>(done));
      if (r < 0 && errno == EINTR) continue;
      THD_CHECK(r > 0, ConnectionError, op, "cannot write the store file '{}': {}", path, errno_text(errno));
      done += static_cast<size_t>(r);
    }
  }

  void apply(Kind kind, std::string key, Bytes value) {
    switch (kind) {
      case Kind::Set:
        map[std::move(key)] = std::move(value);
        break;
      case Kind::Delete:
        map.erase(key);
        break;
      case Kind::Finished:
        ++finished;
        break;
    }
  }

  void check_magic(const uint8_t* start, size_t n, const char* op) const {
    THD_CHECK(std::memcmp(start, kMagic, n) == 0, ValueError, op,
              "'{}' is not a thd FileStore file (it does not start with the FileStore header); "
              "remove it or use another path",
              path);
  }

  // Brings the cache up to date with the locked file. With the exclusive lock it
  // also writes the header of a new file and cuts off a torn last record, so the
  // caller can append.
  void catch_up(int fd, bool exclusive, const char* op) {
    struct stat st {};
    THD_CHECK(::fstat(fd, &st) == 0, ConnectionError, op, "cannot stat the store file '{}': {}", path,
              errno_text(errno));
    const off_t size = st.st_size;
    if (size < static_cast<off_t>(kHeaderBytes)) {
      // New, or its creator died before the header was complete: an empty store.
      // Anything else this short is someone's file, not ours to truncate.
      uint8_t start[kHeaderBytes];
      pread_all(fd, start, static_cast<size_t>(size), 0, op);
      check_magic(start, std::min(static_cast<size_t>(size), sizeof(kMagic)), op);
      reset_cache(std::nullopt);
      if (!exclusive) return;
      THD_CHECK(::ftruncate(fd, 0) == 0, ConnectionError, op, "cannot truncate the store file '{}': {}", path,
                errno_text(errno));
      const net::Nonce nonce = net::random_nonce();
      FileId id;
      std::memcpy(id.data(), nonce.data(), kFileIdBytes);
      uint8_t header[kHeaderBytes];
      std::memcpy(header, kMagic, sizeof(kMagic));
      std::memcpy(header + sizeof(kMagic), id.data(), kFileIdBytes);
      pwrite_all(fd, header, kHeaderBytes, 0, op);
      reset_cache(id);
      return;
    }
    uint8_t header[kHeaderBytes];
    pread_all(fd, header, kHeaderBytes, 0, op);
    check_magic(header, sizeof(kMagic), op);
    FileId id;
    std::memcpy(id.data(), header + sizeof(kMagic), kFileIdBytes);
    // Another file now (the old one was removed), or this one shrank behind our
    // back: what we cached no longer describes it.
    if (file_id != id || size < offset) reset_cache(id);
    if (size == offset) return;
    Bytes buf(static_cast<size_t>(size - offset));
    pread_all(fd, buf.data(), buf.size(), offset, op);
    size_t pos = 0;
    for (;;) {
      // kind + key_len, key, value_len, value: stop at the first record not all there.
      if (buf.size() - pos < 5) break;
      const auto kind = static_cast<Kind>(buf[pos]);
      THD_CHECK(kind == Kind::Set || kind == Kind::Delete || kind == Kind::Finished, ValueError, op,
                "the store file '{}' is corrupt: unknown record kind {} at offset {}", path, buf[pos],
                offset + static_cast<off_t>(pos));
      const size_t key_len = get_u32(&buf[pos + 1]);
      if (buf.size() - pos - 5 < key_len + 4) break;
      const size_t value_at = pos + 5 + key_len + 4;
      const size_t value_len = get_u32(&buf[value_at - 4]);
      if (buf.size() - value_at < value_len) break;
      apply(kind, std::string(reinterpret_cast<const char*>(&buf[pos + 5]), key_len),
            Bytes(buf.begin() + static_cast<ptrdiff_t>(value_at),
                  buf.begin() + static_cast<ptrdiff_t>(value_at + value_len)));
      pos = value_at + value_len;
    }
    offset += static_cast<off_t>(pos);
    if (exclusive && offset < size) {
      THD_LOG_WARN("store file '{}': dropping a torn record of {} bytes at offset {} (a writer died mid-append)",
                   path, size - offset, offset);
      THD_CHECK(::ftruncate(fd, offset) == 0, ConnectionError, op, "cannot truncate the store file '{}': {}",
                path, errno_text(errno));
    }
  }

  void append(int fd, Kind kind, const std::string& key, const Bytes& value, const char* op) {
    THD_CHECK(key.size() <= UINT32_MAX && value.size() <= UINT32_MAX, ValueError, op,
              "key or value too large for a FileStore record ({} and {} bytes)", key.size(), value.size());
    Bytes rec;
    rec.reserve(9 + key.size() + value.size());
    rec.push_back(static_cast<uint8_t>(kind));
    put_u32(rec, static_cast<uint32_t>(key.size()));
    rec.insert(rec.end(), key.begin(), key.end());
    put_u32(rec, static_cast<uint32_t>(value.size()));
    rec.insert(rec.end(), value.begin(), value.end());
    pwrite_all(fd, rec.data(), rec.size(), offset, op);
    offset += static_cast<off_t>(rec.size());
    apply(kind, key, value);
  }

  // Runs fn on an up-to-date cache, with the file locked; fn may append.
  template <typename Fn>
  auto locked(bool exclusive, const char* op, Fn&& fn) {
    std::lock_guard lock(mu);
    UniqueFd fd = open_locked(exclusive, op);
    catch_up(fd.get(), exclusive, op);
    return fn(fd.get());
  }

  std::optional<Bytes> find(const std::string& key) const { return detail::find_key(map, key); }

  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    return detail::missing_keys(map, keys);
  }
};

FileStore::FileStore(std::string path, int world_size, std::chrono::milliseconds timeout)
    : Store(timeout), impl_(std::make_unique<Impl>(std::move(path), world_size)) {
  THD_CHECK(!impl_->path.empty(), ValueError, "FileStore", "the path is empty");
  // Create the file (and check an existing one is a store) now, so a bad path
  // fails here rather than in the first operation.
  impl_->locked(/*exclusive=*/true, "FileStore", [](int) { return 0; });
}

FileStore::~FileStore() {
  if (impl_->world_size <= 0) return;
  try {
    impl_->locked(/*exclusive=*/true, "FileStore", [&](int fd) {
      impl_->append(fd, Kind::Finished, "", {}, "FileStore");
      if (impl_->finished >= impl_->world_size) ::unlink(impl_->path.c_str());
      return 0;
    });
  } catch (const Error& e) {
    // A destructor cannot report it; the file stays behind, which is harmless
    // unless the next job reuses the path.
    THD_LOG_WARN("FileStore '{}': cleanup failed: {}", impl_->path, e.what());
  }
}

const std::string& FileStore::path() const noexcept { return impl_->path; }

void FileStore::do_set(const std::string& key, const std::vector<uint8_t>& value) {
  impl_->locked(true, "store.set", [&](int fd) {
    impl_->append(fd, Kind::Set, key, value, "store.set");
    return 0;
  });
}

std::vector<uint8_t> FileStore::do_get(const std::string& key, std::chrono::milliseconds timeout) {
  const auto deadline = detail::deadline_after(timeout);
  Backoff backoff;
  for (;;) {
    auto value = impl_->locked(false, "store.get", [&](int) { return impl_->find(key); });
    if (value) return std::move(*value);
    if (Clock::now() >= deadline) detail::throw_get_timeout(key, timeout);
    backoff.sleep_until_at_most(deadline);
  }
}

int64_t FileStore::do_add(const std::string& key, int64_t delta) {
  return impl_->locked(true, "store.add", [&](int fd) {
    const int64_t result = detail::apply_add(impl_->find(key), delta, key);
    impl_->append(fd, Kind::Set, key, detail::encode_counter(result), "store.add");
    return result;
  });
}

std::vector<uint8_t> FileStore::do_compare_set(const std::string& key, const std::vector<uint8_t>& expected,
                                               const std::vector<uint8_t>& desired) {
  return impl_->locked(true, "store.compare_set", [&](int fd) {
    detail::CompareSetOutcome outcome = detail::apply_compare_set(impl_->find(key), expected, desired);
    if (outcome.store) impl_->append(fd, Kind::Set, key, outcome.result, "store.compare_set");
    return std::move(outcome.result);
  });
}

void FileStore::do_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = detail::deadline_after(timeout);
  Backoff backoff;
  for (;;) {
    auto missing = impl_->locked(false, "store.wait", [&](int) { return impl_->missing(keys); });
    if (missing.empty()) return;
    if (Clock::now() >= deadline) detail::throw_wait_timeout(missing, keys.size(), timeout);
    backoff.sleep_until_at_most(deadline);
  }
}

bool FileStore::do_check(const std::vector<std::string>& keys) {
  return impl_->locked(false, "store.check", [&](int) { return impl_->missing(keys).empty(); });
}

bool FileStore::do_delete_key(const std::string& key) {
  return impl_->locked(true, "store.delete_key", [&](int fd) {
    if (!impl_->map.contains(key)) return false;
    impl_->append(fd, Kind::Delete, key, {}, "store.delete_key");
    return true;
  });
}

int64_t FileStore::do_num_keys() {
  return impl_->locked(false, "store.num_keys", [&](int) { return static_cast<int64_t>(impl_->map.size()); });
}

}  // namespace thd
