// torch: "Integers to negative integer powers are not allowed." The check an
// integer pow makes of its exponent before writing anything, shared by the
// allocating op (binary_ops.cpp) and its write-into form (into_elementwise.cpp).
#pragma once

#include <thd/scalar.h>
#include <thd/tensor.h>

namespace thd::detail {

// ValueError when `compute` is integral and `exponent` holds a negative value.
void check_integer_exponent(const Tensor& exponent, DType compute);
// The same for a number, read as the compute dtype.
void check_integer_exponent(const Scalar& exponent, DType compute);

}  // namespace thd::detail
