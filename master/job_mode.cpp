#include "master/job_mode.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <system_error>

#include "tensor/log.h"

namespace thd::master {

void announce_master_worker_job() noexcept {
  const char* path = std::getenv(kJobModeFileVariable);
  if (path == nullptr || *path == '\0') return;
  // O_NOFOLLOW: the directory is the launcher's private one; a link there is not ours to follow.
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  const std::string_view text = kMasterWorkerJobMode;
  bool written = fd >= 0;
  int err = fd >= 0 ? 0 : errno;
  for (size_t done = 0; written && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = errno;
      written = false;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (fd >= 0) ::close(fd);
  if (!written) {
    THD_LOG_WARN("thd: cannot write the job mode to {}='{}': {}; the launcher will treat a lost worker as the end "
                 "of the job", kJobModeFileVariable, path, std::system_category().message(err));
  }
}

}  // namespace thd::master
