// Helpers for tests that drive a detail::Transport directly: envelopes, requests,
// waits with a verdict, and ranks run as threads.
#pragma once

#include <sys/resource.h>

#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "datachannel/envelope.h"
#include "datachannel/request_state.h"
#include "datachannel/test_util.h"
#include "datachannel/transport.h"

namespace thd::test {

using detail::Envelope;
using detail::RequestState;
using detail::Transport;
using RequestPtr = std::shared_ptr<RequestState>;

// A point-to-point message of raw bytes, as send_bytes makes them.
inline Envelope raw_envelope(int64_t tag, size_t bytes, uint32_t context = 0) {
  Envelope e;
  e.context = context;
  e.tag = tag;
  e.kind.op = detail::MessageOp::P2P;
  e.kind.dtype = detail::kRawBytes;
  e.kind.count = bytes;
  return e;
}

inline RequestPtr new_request(Transport& t, std::string op, std::chrono::milliseconds timeout = kLong) {
  return std::make_shared<RequestState>(std::move(op), net::deadline_after(timeout), &t, t.rank());
}

inline RequestPtr isend(Transport& t, std::span<const uint8_t> data, int dst, const Envelope& e) {
  auto r = new_request(t, "send to rank " + std::to_string(dst));
  t.post_send(data, dst, e, r);
  return r;
}
inline RequestPtr isend(Transport& t, std::span<const uint8_t> data, int dst, int64_t tag = 0) {
  return isend(t, data, dst, raw_envelope(tag, data.size()));
}

inline RequestPtr irecv(Transport& t, std::span<uint8_t> data, int src, const Envelope& e) {
  auto r = new_request(t, "recv from rank " + std::to_string(src));
  t.post_recv(data, src, e, r);
  return r;
}
inline RequestPtr irecv(Transport& t, std::span<uint8_t> data, int src, int64_t tag = 0) {
  return irecv(t, data, src, raw_envelope(tag, data.size()));
}

// Waits through the transport (as Request::wait does). The error of a failed
// request; nullptr on success; a TimeoutError if it did not finish in time.
inline std::exception_ptr wait_error(Transport& t, RequestState& r, std::chrono::milliseconds timeout = kLong) {
  if (!t.wait(r, in(timeout))) {
    return std::make_exception_ptr(TimeoutError("test: '" + r.op + "' did not finish in time"));
  }
  return r.status() == RequestState::Failed ? r.error : nullptr;
}

inline std::string what(const std::exception_ptr& e) {
  if (!e) return "(no error)";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

// Waits and expects success; true if it succeeded.
inline bool wait_ok(Transport& t, RequestState& r, std::chrono::milliseconds timeout = kLong) {
  std::exception_ptr e = wait_error(t, r, timeout);
  EXPECT_EQ(e, nullptr) << r.op << ": " << what(e);
  return e == nullptr;
}

// True when `e` holds an ExcType; its what() and context go to the out-params.
template <typename ExcType>
bool holds(const std::exception_ptr& e, std::string* message = nullptr, ErrorContext* context = nullptr) {
  try {
    if (e) std::rethrow_exception(e);
  } catch (const ExcType& x) {
    if (message != nullptr) *message = x.what();
    if constexpr (std::is_base_of_v<Error, ExcType>) {
      if (context != nullptr) *context = x.context();
    }
    return true;
  } catch (...) {
  }
  return false;
}

// Bytes that differ for each (size, seed), so a misplaced or reordered message shows.
inline std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + n + 1;
  for (size_t i = 0; i < n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(v.data() + i, &x, std::min<size_t>(8, n - i));
  }
  return v;
}

// Runs body(rank) on `world` threads at once and joins them all; the first
// exception is rethrown here.
inline void run_ranks(int world, const std::function<void(int)>& body) {
  for (auto& e : run_rank_threads(world, body)) {
    if (e) std::rethrow_exception(e);
  }
}

// CPU time of the calling thread (a waiter that spins takes it; one that blocks does not).
inline std::chrono::microseconds thread_cpu_time() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) +
         std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::nanoseconds(ts.tv_nsec));
}

// Times the calling thread gave its core up by blocking (getrusage's voluntary
// context switches): a waiter that blocks adds at least one; one that only yields
// adds none, however loaded the host (a yield is an involuntary switch).
inline long thread_blocked_count() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nvcsw;
}

}  // namespace thd::test
