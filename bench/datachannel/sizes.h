// The message sizes of the datachannel suite's figures, full and under --quick.
// Figure names carry the size used ("dc.tcp.p2p.bw.64MiB"), so the two never mix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace thd::bench::dc {

struct Sizes {
  explicit Sizes(bool quick)
      : bw_bytes(quick ? kKiB * 64 : kMiB * 64),
        allreduce_bytes(quick ? std::vector<int64_t>{kKiB * 4, kKiB * 16, kKiB * 64}
                              : std::vector<int64_t>{kKiB * 4, kMiB, kMiB * 64}),
        allreduce_f16_bytes(quick ? std::vector<int64_t>{kKiB * 64} : std::vector<int64_t>{kMiB, kMiB * 64}),
        broadcast_bytes(quick ? kKiB * 64 : kMiB * 64) {}

  static constexpr int64_t kKiB = 1024;
  static constexpr int64_t kMiB = 1024 * 1024;

  int64_t rtt_bytes = 8;
  int64_t bw_bytes;
  std::vector<int64_t> allreduce_bytes;  // float32 tensors: multiples of 4
  // float16 tensors (summed in float32: twice the bytes on the wire), by their own size.
  std::vector<int64_t> allreduce_f16_bytes;
  int64_t broadcast_bytes;
  // The all_reduce size compared with MPI (full runs only).
  static constexpr int64_t kMpiAllreduceBytes = kMiB * 64;
};

// "8B", "4KiB", "64MiB".
inline std::string size_label(int64_t bytes) {
  if (bytes >= Sizes::kMiB && bytes % Sizes::kMiB == 0) return std::to_string(bytes / Sizes::kMiB) + "MiB";
  if (bytes >= Sizes::kKiB && bytes % Sizes::kKiB == 0) return std::to_string(bytes / Sizes::kKiB) + "KiB";
  return std::to_string(bytes) + "B";
}

}  // namespace thd::bench::dc
