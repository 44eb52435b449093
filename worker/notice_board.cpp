#include "worker/notice_board.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <climits>
#include <ctime>
#include <cstring>
#include <limits>
#include <string_view>

#include "datachannel/net/fd.h"
#include "tensor/log.h"

namespace thd::worker {

namespace {

static_assert(std::atomic<int64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "a board is shared between processes");

// A slot's value: 0 silent, tag + 1 done, -(tag + 1) read the notice. Tags are
// never negative (check_transfer_tag); one that is, or is too large to encode,
// never rings.
bool encodable(int64_t tag) { return tag >= 0 && tag < std::numeric_limits<int64_t>::max(); }

void* map_slots(int fd, size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

constexpr std::string_view kDevShm = "/dev/shm";
constexpr std::string_view kBoardPrefix = "thd-notices-";

// The name of `node`'s board but its maker's pid, without the leading slash.
std::string board_prefix(uint64_t session, int node) {
  return fmt::format("{}{:016x}-{}-", kBoardPrefix, session, node);
}

// Calls `fn` with the name (no leading slash) of every file under /dev/shm that
// looks like a board.
template <typename Fn>
void for_each_board(Fn&& fn) {
  DIR* dir = ::opendir(kDevShm.data());
  if (dir == nullptr) return;
  while (const dirent* e = ::readdir(dir)) {
    const std::string_view file(e->d_name);
    if (file.starts_with(kBoardPrefix)) fn(std::string(file));
  }
  ::closedir(dir);
}

// A board file's maker (its name's last field), -1 when it has none.
int64_t maker_of(const std::string& file) {
  const size_t dash = file.rfind('-');
  if (dash == std::string::npos || dash + 1 >= file.size()) return -1;
  int64_t pid = 0;
  for (size_t i = dash + 1; i < file.size(); ++i) {
    if (file[i] < '0' || file[i] > '9' || pid > (int64_t{1} << 40)) return -1;
    pid = pid * 10 + (file[i] - '0');
  }
  return pid;
}

// The boards of this user's processes that are gone (killed before they could
// remove theirs). A pid from another pid namespace may look gone here: removing
// that name only keeps later peers from finding the board (their waits then take
// the message), never the bells of those who mapped it already.
void remove_boards_of_dead_processes() {
  for_each_board([](const std::string& file) {
    const int64_t pid = maker_of(file);
    if (pid <= 0 || pid > std::numeric_limits<pid_t>::max()) return;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) return;
    struct stat st {};
    const std::string path = std::string(kDevShm) + "/" + file;
    if (::stat(path.c_str(), &st) != 0 || st.st_uid != ::geteuid()) return;
    ::shm_unlink(("/" + file).c_str());
  });
}

}  // namespace

std::string NoticeBoard::name_of(uint64_t session, int node, int64_t pid) {
  return fmt::format("/{}{}", board_prefix(session, node), pid);
}

std::unique_ptr<NoticeBoard> NoticeBoard::create(uint64_t session, int node) {
  remove_boards_of_dead_processes();
  std::string name = name_of(session, node, ::getpid());
  // O_EXCL: a file already there is someone else's (or a dead session's with the
  // same id, which a random 64-bit id makes a non-event); this node then goes
  // without a board rather than share one.
  net::UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) {
    THD_LOG_INFO("worker node {}: no shared-memory notice board ({}): event waits use messages only", node,
                 std::strerror(errno));
    return nullptr;
  }
  void* slots = nullptr;
  if (::ftruncate(fd.get(), static_cast<off_t>(kBytes)) == 0) slots = map_slots(fd.get(), kBytes);
  if (slots == nullptr) {
    THD_LOG_INFO("worker node {}: could not size or map the notice board ({}): event waits use messages only", node,
                 std::strerror(errno));
    ::shm_unlink(name.c_str());
    return nullptr;
  }
  return std::unique_ptr<NoticeBoard>(new NoticeBoard(static_cast<Slot*>(slots), std::move(name), /*owner=*/true));
}

std::unique_ptr<NoticeBoard> NoticeBoard::open(uint64_t session, int node) {
  // The board's file carries its maker's pid, which only the maker knows.
  const std::string prefix = board_prefix(session, node);
  std::string name;
  for_each_board([&](const std::string& file) {
    if (name.empty() && file.starts_with(prefix)) name = "/" + file;
  });
  if (name.empty()) return nullptr;  // not on this host
  net::UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd) return nullptr;  // not on this host
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0 ||
      static_cast<size_t>(st.st_size) != kBytes) {
    THD_LOG_WARN("{} is not a notice board of this user's; node {}'s event notices go by message only", name, node);
    return nullptr;
  }
  void* slots = map_slots(fd.get(), kBytes);
  if (slots == nullptr) return nullptr;
  return std::unique_ptr<NoticeBoard>(new NoticeBoard(static_cast<Slot*>(slots), std::move(name), /*owner=*/false));
}

NoticeBoard::~NoticeBoard() {
  ::munmap(static_cast<void*>(slots_), kBytes);
  if (owner_) ::shm_unlink(name_.c_str());
}

void NoticeBoard::ring(int64_t tag, Doorbell what) noexcept {
  if (!encodable(tag) || what == Doorbell::Silent) return;
  Slot& s = slot(tag);
  // Whatever the recording node did before (the record itself) is visible to a
  // waiter that sees the bell. Sequentially consistent with wait_for's sleepers
  // count: either the ringer sees a sleeper and wakes it, or the sleeper sees the
  // ring before it sleeps.
  s.bell.store(what == Doorbell::Done ? tag + 1 : -(tag + 1));
  s.rings.fetch_add(1);
  if (s.sleepers.load() != 0) {
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&s.rings), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
}

NoticeBoard::Doorbell NoticeBoard::look(int64_t tag) const noexcept {
  if (!encodable(tag)) return Doorbell::Silent;
  const int64_t v = slot(tag).bell.load(std::memory_order_acquire);
  if (v == tag + 1) return Doorbell::Done;
  if (v == -(tag + 1)) return Doorbell::ReadNotice;
  return Doorbell::Silent;
}

NoticeBoard::Doorbell NoticeBoard::take(int64_t tag) noexcept {
  if (!encodable(tag)) return Doorbell::Silent;
  std::atomic<int64_t>& bell = slot(tag).bell;
  int64_t v = bell.load(std::memory_order_acquire);
  if (v != tag + 1 && v != -(tag + 1)) return Doorbell::Silent;
  // Only this tag's bell is cleared; if a ring came meanwhile, it stays for its wait.
  const Doorbell seen = v == tag + 1 ? Doorbell::Done : Doorbell::ReadNotice;
  bell.compare_exchange_strong(v, 0, std::memory_order_acq_rel);
  return seen;
}

NoticeBoard::Doorbell NoticeBoard::wait_for(int64_t tag, std::chrono::microseconds at_most) noexcept {
  if (!encodable(tag)) return Doorbell::Silent;
  Slot& s = slot(tag);
  s.sleepers.fetch_add(1);
  const uint32_t rings = s.rings.load();
  Doorbell bell = take(tag);
  if (bell == Doorbell::Silent) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at_most).count();
    const timespec timeout{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    // Returns at once if a ring came since `rings` was read; shared (not
    // FUTEX_PRIVATE): the ringer is another process.
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&s.rings), FUTEX_WAIT, rings, &timeout, nullptr, 0);
    bell = take(tag);
  }
  s.sleepers.fetch_sub(1);
  return bell;
}

}  // namespace thd::worker
