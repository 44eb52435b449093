#include "remote_check.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace thd::test {
namespace {

std::string demangled(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status),
                                              std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(type.name());
}

// The local and remote runs execute the same kernels; the slack only covers a
// different summation order (another thread count on the worker).
double slack(DType dtype) { return 4 * tolerance(dtype); }

::testing::AssertionResult same_metadata(const DistributedTensor& got, const Tensor& expected, int node) {
  if (!got.defined()) return ::testing::AssertionFailure() << "the remote result is undefined";
  if (got.node() != node) return ::testing::AssertionFailure() << "on node " << got.node() << ", expected " << node;
  if (got.dtype() != expected.dtype()) {
    return ::testing::AssertionFailure() << "master-side dtype " << got.dtype() << ", local op gives "
                                         << expected.dtype();
  }
  if (got.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << "master-side shape " << shape_str(got.shape()) << ", local op gives "
                                         << shape_str(expected.shape());
  }
  if (got.strides() != expected.strides()) {
    return ::testing::AssertionFailure() << "master-side strides " << shape_str(got.strides())
                                         << ", local op gives " << shape_str(expected.strides());
  }
  if (got.numel() != expected.numel() || got.dim() != expected.dim() || got.nbytes() != expected.nbytes() ||
      got.is_contiguous() != expected.is_contiguous()) {
    return ::testing::AssertionFailure() << "numel/dim/nbytes/is_contiguous disagree with the local op: "
                                         << got.numel() << "/" << got.dim() << "/" << got.nbytes() << "/"
                                         << got.is_contiguous() << " vs " << expected.numel() << "/"
                                         << expected.dim() << "/" << expected.nbytes() << "/"
                                         << expected.is_contiguous();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

::testing::AssertionResult same_tensor(const Tensor& got, const Tensor& expected) {
  if (!got.defined()) return ::testing::AssertionFailure() << "get() gave an undefined tensor";
  if (got.dtype() != expected.dtype()) {
    return ::testing::AssertionFailure() << "got dtype " << got.dtype() << ", expected " << expected.dtype();
  }
  if (got.shape() != expected.shape()) {
    return ::testing::AssertionFailure() << "got shape " << shape_str(got.shape()) << ", expected "
                                         << shape_str(expected.shape());
  }
  if (!got.is_contiguous()) return ::testing::AssertionFailure() << "get() gave a non-contiguous tensor";
  const double tol = slack(expected.dtype());
  auto result = close(got, values(expected), tol, tol);
  if (!result) return result << "\n  got:      " << got.str() << "\n  expected: " << expected.str();
  return result;
}

::testing::AssertionResult matches(const DistributedTensor& got, const Tensor& expected, int node) {
  auto meta = same_metadata(got, expected, node);
  if (!meta) return meta;
  Tensor local;
  try {
    local = got.get();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "get() threw " << error_type(std::current_exception()) << ": "
                                         << e.what();
  }
  return same_tensor(local, expected);
}

::testing::AssertionResult matches(const std::vector<DistributedTensor>& got, const std::vector<Tensor>& expected,
                                   int node) {
  if (got.size() != expected.size()) {
    return ::testing::AssertionFailure() << got.size() << " remote results, local op gives " << expected.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    auto r = matches(got[i], expected[i], node);
    if (!r) return r << " (result " << i << ")";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult matches(const std::pair<DistributedTensor, DistributedTensor>& got,
                                   const std::pair<Tensor, Tensor>& expected, int node) {
  auto first = matches(got.first, expected.first, node);
  if (!first) return first << " (first of the pair)";
  auto second = matches(got.second, expected.second, node);
  if (!second) return second << " (second of the pair)";
  return ::testing::AssertionSuccess();
}

std::string error_type(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return demangled(typeid(e));
  } catch (const std::exception& e) {
    return "not a thd::Error: " + demangled(typeid(e));
  } catch (...) {
    return "not a std::exception";
  }
}

std::string error_text(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "?";
  }
}

std::string describe_outcome(const DistributedTensor& got) {
  try {
    return "get() gave " + got.get().str();
  } catch (...) {
    return "get() threw " + error_type(std::current_exception()) + ": " + error_text(std::current_exception());
  }
}

std::string describe_outcome(const std::vector<DistributedTensor>& got) {
  std::string out;
  for (const auto& t : got) out += describe_outcome(t) + "; ";
  return out;
}

std::string describe_outcome(const std::pair<DistributedTensor, DistributedTensor>& got) {
  return describe_outcome(got.first) + "; " + describe_outcome(got.second);
}

}  // namespace thd::test
