#include "streams/trace_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tensor/check.h"

namespace thd::trace::detail {

AtomicFileWriter::AtomicFileWriter(std::string path) : path_(std::move(path)) {
  temp_path_ = path_ + ".XXXXXX";
  fd_ = ::mkostemp(temp_path_.data(), O_CLOEXEC);  // mode 0600
  if (fd_ < 0) {
    const int err = errno;
    temp_path_.clear();
    fail("create a temporary file for", err);
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write", errno);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void AtomicFileWriter::commit() {
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("write", errno);  // delayed write errors (NFS, quota) show here
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) fail("rename the temporary file onto", errno);
  committed_ = true;
}

void AtomicFileWriter::fail(const char* doing, int err) {
  THD_THROW(Error, "trace.write", "cannot {} trace file '{}': {}", doing, path_, std::strerror(err));
}

}  // namespace thd::trace::detail
