#include "checks.h"

#include <cstring>

namespace thd::conformance {

void fail(const std::string& message) { throw ConformanceFailure(message); }

std::string describe(const std::exception_ptr& error) {
  if (!error) return "no error";
  try {
    std::rethrow_exception(error);
  } catch (const ConformanceFailure& e) {
    return std::string("check failed: ") + e.what();
  } catch (const PeerLost& e) {
    return std::string("PeerLost: ") + e.what();
  } catch (const ConnectionError& e) {
    return std::string("ConnectionError: ") + e.what();
  } catch (const TimeoutError& e) {
    return std::string("TimeoutError: ") + e.what();
  } catch (const AuthError& e) {
    return std::string("AuthError: ") + e.what();
  } catch (const ShapeError& e) {
    return std::string("ShapeError: ") + e.what();
  } catch (const ValueError& e) {
    return std::string("ValueError: ") + e.what();
  } catch (const TypeError& e) {
    return std::string("TypeError: ") + e.what();
  } catch (const IndexError& e) {
    return std::string("IndexError: ") + e.what();
  } catch (const Error& e) {
    return std::string("thd::Error: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("std::exception: ") + e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

void require_mentions(std::string_view message, std::initializer_list<std::string_view> needles,
                      const std::string& what) {
  for (std::string_view needle : needles) {
    if (message.find(needle) == std::string_view::npos) {
      fail(what + ": the message '" + std::string(message) + "' does not mention '" + std::string(needle) + "'");
    }
  }
}

namespace {

std::string element_str(const Tensor& flat, int64_t i) {
  const Tensor e = flat.slice(0, i, i + 1);
  if (is_floating_point(flat.dtype())) return std::to_string(e.item<double>());
  return std::to_string(e.item<int64_t>());
}

}  // namespace

void require_same(const Tensor& actual, const Tensor& expected, const std::string& what) {
  require(actual.defined(), what + ": the result is an undefined tensor");
  require(actual.dtype() == expected.dtype(), what + ": dtype " + std::string(dtype_name(actual.dtype())) +
                                                  ", expected " + std::string(dtype_name(expected.dtype())));
  require(actual.numel() == expected.numel(), what + ": " + std::to_string(actual.numel()) + " elements, expected " +
                                                  std::to_string(expected.numel()));
  const Tensor a = actual.contiguous().reshape({actual.numel()});
  const Tensor b = expected.contiguous().reshape({expected.numel()});
  if (a.numel() == 0) return;
  if (std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0) return;
  const auto* pa = static_cast<const uint8_t*>(a.data_ptr());
  const auto* pb = static_cast<const uint8_t*>(b.data_ptr());
  const size_t esize = a.element_size();
  int64_t first = 0;
  int64_t differing = 0;
  for (int64_t i = a.numel() - 1; i >= 0; --i) {
    if (std::memcmp(pa + i * esize, pb + i * esize, esize) != 0) {
      first = i;
      ++differing;
    }
  }
  fail(what + ": " + std::to_string(differing) + " of " + std::to_string(a.numel()) + " " +
       std::string(dtype_name(a.dtype())) + " elements differ; the first is element " + std::to_string(first) +
       ": got " + element_str(a, first) + ", expected " + element_str(b, first));
}

std::chrono::milliseconds time_of(const std::function<void()>& call) {
  const auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
}

}  // namespace thd::conformance
