// Checks that work the same on a rank thread and in a forked rank process: a
// failed check throws ConformanceFailure (the thread harness turns it into a test
// failure naming the rank; a child process prints it and exits nonzero), so the
// rank code never depends on which harness runs it.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>

#include <thd/error.h>
#include <thd/tensor.h>

namespace thd::conformance {

class ConformanceFailure : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& message);
inline void require(bool condition, const std::string& message) {
  if (!condition) fail(message);
}

// "TimeoutError: all_reduce: ... [rank 1] (file:line)" for any exception.
std::string describe(const std::exception_ptr& error);

// Byte-for-byte equality of two tensors of the same dtype and numel (shapes may
// differ); on a difference, names the first element that differs and both values.
void require_same(const Tensor& actual, const Tensor& expected, const std::string& what);

// Runs `call` and requires it to throw Exc (or a subclass) whose what() contains
// every needle. Returns the error's message.
template <typename Exc>
std::string require_throws(const std::function<void()>& call, std::initializer_list<std::string_view> needles,
                           const std::string& what);

// Requires `error` to be an Exc whose what() contains every needle.
template <typename Exc>
void require_error(const std::exception_ptr& error, std::initializer_list<std::string_view> needles,
                   const std::string& what);

// How long `call` took.
std::chrono::milliseconds time_of(const std::function<void()>& call);

// ---- template definitions -----------------------------------------------------------

void require_mentions(std::string_view message, std::initializer_list<std::string_view> needles,
                      const std::string& what);

template <typename Exc>
void require_error(const std::exception_ptr& error, std::initializer_list<std::string_view> needles,
                   const std::string& what) {
  if (!error) fail(what + ": succeeded, expected an error");
  try {
    std::rethrow_exception(error);
  } catch (const Exc& e) {
    require_mentions(e.what(), needles, what);
  } catch (...) {
    fail(what + ": expected a different error type, got " + describe(std::current_exception()));
  }
}

template <typename Exc>
std::string require_throws(const std::function<void()>& call, std::initializer_list<std::string_view> needles,
                           const std::string& what) {
  std::exception_ptr error;
  try {
    call();
  } catch (...) {
    error = std::current_exception();
  }
  require_error<Exc>(error, needles, what);
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return {};
  }
}

}  // namespace thd::conformance
