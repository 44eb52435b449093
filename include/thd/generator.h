// Random numbers from a counter-based generator (Philox 4x32-10). Element i of a
// random tensor depends only on the seed, the generator's offset when the tensor
// was made and i, so results are the same whatever the number of threads.
#pragma once

#include <cstdint>
#include <mutex>

namespace thd {

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) : seed_(seed) {}

  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  // Philox counters consumed so far.
  uint64_t offset() const;
  // Reserves `counters` Philox counters for one op and returns the first; thread-safe.
  uint64_t reserve(uint64_t counters);

 private:
  mutable std::mutex mu_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide generator used when an op is given none.
Generator& default_generator();
// Reseeds the default generator (torch.manual_seed).
void manual_seed(uint64_t seed);

}  // namespace thd
