// A file written in full or not at all: bytes go to a temporary file beside the
// target, which commit() renames over it; destroying an uncommitted writer removes
// the temporary. Private to streams/trace*.
#pragma once

#include <string>
#include <string_view>

namespace thd::trace::detail {

class AtomicFileWriter {
 public:
  // Creates `path`.XXXXXX (mode 0600). Throws thd::Error naming `path`.
  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends all of `bytes`. Throws thd::Error naming the path.
  void write(std::string_view bytes);
  // Closes the temporary and renames it to the path. Throws thd::Error naming it.
  void commit();

 private:
  [[noreturn]] void fail(const char* doing, int err);

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace thd::trace::detail
