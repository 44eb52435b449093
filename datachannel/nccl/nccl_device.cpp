#include "datachannel/nccl/nccl_device.h"

#include <climits>
#include <string>

#include <thd/cuda.h>

#include "datachannel/check.h"
#include "datachannel/net/auth.h"
#include "tensor/env_setting.h"

namespace thd::detail::nccl {

int local_rank() {
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const WholeNumberSetting rank{.name = name, .max = INT_MAX};
    if (auto n = parse_whole_number(rank, net::process_env(name), "nccl backend")) return static_cast<int>(*n);
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
