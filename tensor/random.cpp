// rand, randn and randint over Philox. Element i reads Philox block `base + i / per`
// (per = elements served by one 128-bit block), so the values depend only on the
// seed, the generator offset and i — never on how the work was split across threads.
#include <cmath>
#include <numbers>

#include "tensor/check.h"
#include "tensor/into_random.h"
#include "tensor/loops.h"
#include "tensor/op_util.h"
#include "tensor/philox.h"
#include "tensor/shape_util.h"

namespace thd {

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard lock(mu_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seed() const {
  std::lock_guard lock(mu_);
  return seed_;
}

uint64_t Generator::offset() const {
  std::lock_guard lock(mu_);
  return offset_;
}

uint64_t Generator::reserve(uint64_t counters) {
  std::lock_guard lock(mu_);
  uint64_t base = offset_;
  offset_ += counters;
  return base;
}

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

namespace {

using namespace detail;

// Fills a fresh contiguous tensor: value(i, block) computes element i from the Philox
// block it belongs to. Each element is independent, so chunks run in parallel.
template <typename T, int kPerBlock, typename F>
void fill_random(Tensor& t, Generator* gen, F value) {
  Generator& g = gen != nullptr ? *gen : default_generator();
  const int64_t n = t.numel();
  const uint64_t base = g.reserve(static_cast<uint64_t>((n + kPerBlock - 1) / kPerBlock));
  const uint64_t key = g.seed();
  T* p = t.data<T>();
  parallel_for(0, n, kGrainSize / 4, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const PhiloxBlock blk = philox4x32_10(key, base + static_cast<uint64_t>(i / kPerBlock));
      p[i] = value(i % kPerBlock, blk);
    }
  });
}

inline uint64_t join64(uint32_t hi, uint32_t lo) { return (static_cast<uint64_t>(hi) << 32) | lo; }

// Uniform on [0, 1) with as many random bits as T's mantissa holds, so that rounding
// can never produce 1.
template <typename T>
T uniform_from(const PhiloxBlock& blk, int lane) {
  if constexpr (std::is_same_v<T, double>) {
    return static_cast<double>(join64(blk[2 * lane], blk[2 * lane + 1]) >> 11) * 0x1.0p-53;
  } else if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(blk[lane] >> 8) * 0x1.0p-24f;
  } else if constexpr (std::is_same_v<T, Half>) {
    return Half(static_cast<float>(blk[lane] >> 21) * 0x1.0p-11f);
  } else {
    return BFloat16(static_cast<float>(blk[lane] >> 24) * 0x1.0p-8f);
  }
}

}  // namespace

namespace {

// The draws of rand, randn and randint into t, a contiguous CPU tensor with elements
// of t's dtype: the generator advances by the blocks t's elements take, whoever made t.
void fill_rand(Tensor& t, Generator* gen) {
  dispatch<kFloatingSet>(t.dtype(), "rand", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      fill_random<T, 2>(t, gen, [](int64_t lane, const PhiloxBlock& b) {
        return uniform_from<T>(b, static_cast<int>(lane));
      });
    } else {
      fill_random<T, 4>(t, gen, [](int64_t lane, const PhiloxBlock& b) {
        return uniform_from<T>(b, static_cast<int>(lane));
      });
    }
  });
}

void fill_randn(Tensor& t, Generator* gen) {
  dispatch<kFloatingSet>(t.dtype(), "randn", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Box-Muller: one block gives two 53-bit uniforms and so a pair of normals; the
    // two elements of a pair each recompute it (cheaper than sharing across threads).
    fill_random<T, 2>(t, gen, [](int64_t lane, const PhiloxBlock& b) {
      const double u1 = 1.0 - static_cast<double>(join64(b[0], b[1]) >> 11) * 0x1.0p-53;  // (0, 1]
      const double u2 = static_cast<double>(join64(b[2], b[3]) >> 11) * 0x1.0p-53;
      const double r = std::sqrt(-2.0 * std::log(u1));
      const double theta = 2.0 * std::numbers::pi * u2;
      return convert<T>(lane == 0 ? r * std::cos(theta) : r * std::sin(theta));
    });
  });
}

void check_randint(int64_t low, int64_t high, DType dtype) {
  THD_CHECK(low < high, ValueError, "randint",
            "expected 'low' to be less than 'high', but got low={} >= high={}", low, high);
  // Every value in [low, high) must be representable in dtype.
  const auto [lo, hi] = dispatch_all(dtype, "randint", [&](auto tag) -> std::pair<double, double> {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, bool>) return {0, 1};
    else if constexpr (is_float_v<T>) return {-9.007199254740992e15, 9.007199254740992e15};
    else return {static_cast<double>(std::numeric_limits<T>::min()),
                 static_cast<double>(std::numeric_limits<T>::max())};
  });
  THD_CHECK(static_cast<double>(low) >= lo && static_cast<double>(high - 1) <= hi, ValueError,
            "randint", "the range [{}, {}) does not fit in dtype {}", low, high, dtype);
}

void fill_randint(Tensor& t, int64_t low, int64_t high, Generator* gen) {
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  dispatch_all(t.dtype(), "randint", [&](auto tag) {
    using T = typename decltype(tag)::type;
    fill_random<T, 2>(t, gen, [&](int64_t lane, const PhiloxBlock& b) {
      const uint64_t x = join64(b[2 * lane], b[2 * lane + 1]);
      const auto v = static_cast<int64_t>(static_cast<uint64_t>(low) + x % range);
      return convert<T>(v);
    });
  });
}

// Whether the draws can go into `out`: contiguous, with elements, of `shape` and
// `dtype`, on the CPU.
bool drawable(const Tensor& out, const Shape& shape, DType dtype) {
  return out.defined() && out.device().is_cpu() && out.dtype() == dtype && out.is_contiguous() &&
         out.numel() > 0 && !out.is_meta() && out.shape() == shape;
}

}  // namespace

Tensor Tensor::rand(const Shape& shape, DType dtype, Generator* gen) {
  Tensor t = empty(shape, dtype);
  fill_rand(t, gen);
  return t;
}

Tensor Tensor::randn(const Shape& shape, DType dtype, Generator* gen) {
  Tensor t = empty(shape, dtype);
  fill_randn(t, gen);
  return t;
}

Tensor Tensor::randint(int64_t low, int64_t high, const Shape& shape, DType dtype, Generator* gen) {
  check_randint(low, high, dtype);
  Tensor t = empty(shape, dtype);
  fill_randint(t, low, high, gen);
  return t;
}

namespace detail {

bool rand_into(const Tensor& out, const Shape& shape, DType dtype, Generator* gen) {
  if (!drawable(out, shape, dtype) || !is_floating_point(dtype)) return false;
  Tensor t = out;
  fill_rand(t, gen);
  return true;
}

bool randn_into(const Tensor& out, const Shape& shape, DType dtype, Generator* gen) {
  if (!drawable(out, shape, dtype) || !is_floating_point(dtype)) return false;
  Tensor t = out;
  fill_randn(t, gen);
  return true;
}

bool randint_into(const Tensor& out, int64_t low, int64_t high, const Shape& shape, DType dtype, Generator* gen) {
  if (!drawable(out, shape, dtype)) return false;
  check_randint(low, high, dtype);
  Tensor t = out;
  fill_randint(t, low, high, gen);
  return true;
}

}  // namespace detail

}  // namespace thd
