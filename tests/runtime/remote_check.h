// Checks of remote ops against the local tensor library: the same generic lambda is
// run on local thd::Tensors and on their uploaded DistributedTensors, and the remote
// result (metadata on the master, then values after get()) must equal the local one.
//
//   expect_remote_matches("add", [](auto a, auto b) { return a + b; }, x, y);
//
// The lambda takes its arguments by value (handles: in-place ops still reach the
// tensors) and returns a tensor, a vector of tensors or a pair of them. Every input
// is compared too after the op, which checks in-place effects and that out-of-place
// ops leave their inputs alone. When the local call throws, the remote call must
// throw the same thd::Error subclass at the call site: the master knows every shape
// and dtype. (Errors that depend on the data can only come from the worker, as
// RemoteErrors: test_remote_errors.cpp; inputs here never fail on their values.)
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <exception>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include <thd/distributed.h>
#include <thd/tensor.h>

#include "tensor/reference.h"

namespace thd::test {

// Metadata on the master, then the downloaded values, against the local result.
::testing::AssertionResult matches(const DistributedTensor& got, const Tensor& expected, int node);
::testing::AssertionResult matches(const std::vector<DistributedTensor>& got, const std::vector<Tensor>& expected,
                                   int node);
::testing::AssertionResult matches(const std::pair<DistributedTensor, DistributedTensor>& got,
                                   const std::pair<Tensor, Tensor>& expected, int node);
// A downloaded tensor against a local one: dtype, shape, contiguity and values
// (exact for integers and bool, a few ulps of the dtype for floating point).
::testing::AssertionResult same_tensor(const Tensor& got, const Tensor& expected);

// The dynamic type of a thd::Error held by `error`, or a description of what it
// holds when that is not a thd::Error.
std::string error_type(const std::exception_ptr& error);
std::string error_text(const std::exception_ptr& error);

// Downloads whatever a remote call returned, for a failure message that says what
// happened instead of a call-site error (get() may raise a RemoteError).
std::string describe_outcome(const DistributedTensor& got);
std::string describe_outcome(const std::vector<DistributedTensor>& got);
std::string describe_outcome(const std::pair<DistributedTensor, DistributedTensor>& got);

namespace call_helpers {

template <typename Fn, typename T, size_t N, size_t... I>
auto call_with(Fn& fn, std::array<T, N>& in, std::index_sequence<I...>) {
  return fn(in[I]...);
}

}  // namespace call_helpers

// Runs `fn` on node `node` and locally and compares the results.
template <typename Fn, typename... Locals>
void expect_remote_matches_on(int node, const std::string& what, Fn fn, const Locals&... locals) {
  SCOPED_TRACE("op: " + what + " on node " + std::to_string(node));
  constexpr size_t kInputs = sizeof...(Locals);
  auto seq = std::make_index_sequence<kInputs>{};
  std::array<DistributedTensor, kInputs> remote_in{DistributedTensor::from(locals, node)...};
  std::array<Tensor, kInputs> local_in{locals.clone()...};

  using LocalResult = decltype(call_helpers::call_with(fn, local_in, seq));
  std::optional<LocalResult> expected;
  std::exception_ptr local_error;
  try {
    expected = call_helpers::call_with(fn, local_in, seq);
  } catch (const Error&) {
    local_error = std::current_exception();
  }

  if (local_error) {
    try {
      auto got = call_helpers::call_with(fn, remote_in, seq);
      ADD_FAILURE() << what << ": the local call throws " << error_type(local_error) << " ("
                    << error_text(local_error) << ") but the remote call did not throw at the call site; "
                    << describe_outcome(got);
    } catch (...) {
      const std::exception_ptr remote_error = std::current_exception();
      EXPECT_EQ(error_type(remote_error), error_type(local_error))
          << what << ": remote error '" << error_text(remote_error) << "', local error '"
          << error_text(local_error) << "'";
    }
    return;
  }

  try {
    auto got = call_helpers::call_with(fn, remote_in, seq);
    EXPECT_TRUE(matches(got, *expected, node)) << what;
  } catch (...) {
    ADD_FAILURE() << what << ": the remote call threw " << error_type(std::current_exception()) << ": "
                  << error_text(std::current_exception()) << " (the local call did not)";
    return;
  }
  for (size_t i = 0; i < kInputs; ++i) {
    EXPECT_TRUE(matches(remote_in[i], local_in[i], node)) << what << ": input " << i << " after the op";
  }
}

template <typename Fn, typename... Locals>
void expect_remote_matches(const std::string& what, Fn fn, const Locals&... locals) {
  expect_remote_matches_on(0, what, std::move(fn), locals...);
}

// The dtypes the elementwise checks run over.
inline const std::vector<DType>& checked_dtypes() {
  static const std::vector<DType> v = {kUInt8, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};
  return v;
}

}  // namespace thd::test
