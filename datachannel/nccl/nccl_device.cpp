#include "datachannel/nccl/nccl_device.h"

#include <charconv>
#include <string>

#include <thd/cuda.h>

#include "datachannel/check.h"
#include "datachannel/net/auth.h"

namespace thd::detail::nccl {

int local_rank() {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const auto value = net::process_env(name);
    if (!value || value->empty()) continue;
    int rank = -1;
    const auto [ptr, ec] = std::from_chars(value->data(), value->data() + value->size(), rank);
    if (ec == std::errc() && ptr == value->data() + value->size() && rank >= 0) return rank;
  }
  return 0;
}

int default_device(std::string_view op, int rank) {
  const int count = cuda::device_count();
  if (count < 1) {
    THD_THROW_AT(ValueError, std::string(op), rank, -1,
                 "no CUDA device: NCCL runs on GPUs and this process sees none (thd::cuda::device_count() is 0; "
                 "check the driver and CUDA_VISIBLE_DEVICES)");
  }
  return local_rank() % count;
}

}  // namespace thd::detail::nccl
