// The UCX transports a ucx test runs over, by the name its parameter gives:
// "shm" (shared memory and self) or anything else (tcp over loopback).
#pragma once

#include <chrono>
#include <string>

#include "datachannel/ucx/ucx_pipe.h"

namespace thd::test {

inline detail::ucx::PipeSettings ucx_settings_for(const std::string& transports) {
  using namespace std::chrono_literals;
  detail::ucx::PipeSettings s;
  if (transports == "shm") {
    s.ucx_config = {{"TLS", "sm,self"}};
  } else {
    s.ucx_config = {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}};
  }
  s.close_timeout = 1s;
  return s;
}

}  // namespace thd::test
