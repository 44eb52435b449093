// The number of threads of this process (Linux: the entries of /proc/self/task),
// for tests that check a part of thd keeps its thread count flat.
#pragma once

#include <cstddef>
#include <filesystem>
#include <iterator>

namespace thd::test {

inline size_t thread_count() {
  const std::filesystem::directory_iterator tasks("/proc/self/task");
  return static_cast<size_t>(std::distance(begin(tasks), end(tasks)));
}

}  // namespace thd::test
