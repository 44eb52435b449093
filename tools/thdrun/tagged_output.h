// --tag-output: what a rank writes to a pipe, copied to the launcher's stdout or
// stderr one whole line at a time, each line prefixed ("[rank 3] ").
#pragma once

#include <string>

#include "tools/thdrun/fd.h"

namespace thd::launch {

// Lines longer than this are cut and written in pieces, each on its own line, so a
// rank that never writes a newline cannot grow the launcher's memory.
inline constexpr size_t kMaxTaggedLine = 64 * 1024;

// A pipe, both ends close-on-exec: spawn() installs the write end as a child's
// stdout or stderr, and the launcher reads the other through a TaggedOutput.
struct Pipe {
  UniqueFd read;
  UniqueFd write;
};
// Throws thd::Error when the pipe cannot be made.
Pipe make_pipe();

class TaggedOutput {
 public:
  // `read_end` is the pipe's read side (made nonblocking here); `out_fd` is where
  // tagged lines go (1 or 2). The write side belongs to the child.
  TaggedOutput(std::string prefix, UniqueFd read_end, int out_fd);

  int fd() const noexcept { return pipe_.get(); }
  bool open() const noexcept { return pipe_.valid(); }

  // Reads what the pipe holds now, without waiting, and writes every complete line.
  // At end of file it writes a last unterminated line (with a newline added) and
  // closes the pipe.
  void pump();
  // For when the rank has exited: everything it wrote is in the pipe already, so
  // read it all (without waiting for an end of file that a process the rank left
  // behind could hold off forever) and close.
  void finish();

 private:
  void emit_lines(bool flush_partial);
  void write_out(const std::string& text);

  std::string prefix_;
  UniqueFd pipe_;
  int out_fd_;
  std::string pending_;  // read, not yet written: no newline yet
};

}  // namespace thd::launch
