#include "tools/thdrun/token_dir.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "tools/thdrun/fd.h"
#include "tensor/check.h"

namespace thd::launch {
namespace {

constexpr const char* kOp = "thdrun";

std::string errno_text(int err) { return std::system_category().message(err); }

void write_all(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    THD_CHECK(n > 0, Error, kOp, "cannot write the token file '{}': {}", path, errno_text(errno));
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string random_token_hex(size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  THD_CHECK(RAND_bytes(raw.data(), static_cast<int>(raw.size())) == 1, Error, kOp,
            "cannot draw a random auth token: OpenSSL RAND_bytes failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * bytes);
  for (unsigned char b : raw) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 0xf]);
  }
  OPENSSL_cleanse(raw.data(), raw.size());
  return hex;
}

TokenDir TokenDir::create(bool with_token) {
  std::error_code ec;
  std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string tmpl = (base / "thdrun-XXXXXX").string();
  THD_CHECK(::mkdtemp(tmpl.data()) != nullptr, Error, kOp, "cannot create the job's private directory '{}': {}",
            tmpl, errno_text(errno));
  TokenDir dir;  // from here on, an exception removes what was made
  dir.dir_ = tmpl;
  if (!with_token) return dir;
  dir.file_ = tmpl + "/token";

  // O_EXCL|O_NOFOLLOW: the file is new, in a directory only we can write to. The
  // explicit fchmod makes the mode exactly 0600 whatever the umask.
  UniqueFd fd(::open(dir.file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  THD_CHECK(fd.valid(), Error, kOp, "cannot create the token file '{}': {}", dir.file_, errno_text(errno));
  THD_CHECK(::fchmod(fd.get(), 0600) == 0, Error, kOp, "cannot set mode 0600 on '{}': {}", dir.file_,
            errno_text(errno));
  std::string line = random_token_hex() + "\n";
  try {
    write_all(fd.get(), line, dir.file_);
  } catch (...) {
    OPENSSL_cleanse(line.data(), line.size());
    throw;
  }
  OPENSSL_cleanse(line.data(), line.size());
  return dir;
}

TokenDir::TokenDir(TokenDir&& other) noexcept
    : dir_(std::exchange(other.dir_, {})), file_(std::exchange(other.file_, {})) {}

TokenDir& TokenDir::operator=(TokenDir&& other) noexcept {
  if (this != &other) {
    remove();
    dir_ = std::exchange(other.dir_, {});
    file_ = std::exchange(other.file_, {});
  }
  return *this;
}

TokenDir::~TokenDir() { remove(); }

void TokenDir::remove() noexcept {
  if (dir_.empty()) return;
  // remove_all does not follow symlinks, so a link a rank planted in the directory
  // removes the link, never what it points to.
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  dir_.clear();
  file_.clear();
}

}  // namespace thd::launch
