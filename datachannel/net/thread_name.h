// Names the calling thread for ps/top/perf/gdb ("thd-tcp-progress" reads better in
// a profile than a bare thread id). Linux keeps at most 15 characters.
#pragma once

#include <pthread.h>

#include <string>

namespace thd::net {

inline void name_this_thread(const std::string& name) {
  const std::string shown = name.substr(0, 15);
  (void)pthread_setname_np(pthread_self(), shown.c_str());
}

}  // namespace thd::net
