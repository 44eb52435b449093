// Which GPU a rank's NCCL work runs on when nothing else says. NCCL cannot run two
// ranks of a communicator on one GPU, so the ranks of a host take its GPUs in turn:
// device = local rank % device count, the local rank being the launcher's
// (thdrun's and torchrun's LOCAL_RANK, Open MPI's, MPICH's, Slurm's).
#pragma once

#include <string_view>

namespace thd::detail::nccl {

// The launcher's local rank of this process, 0 when no launcher says; ValueError
// naming the variable when the first one set holds anything but a whole number.
int local_rank();

// local_rank() % the number of GPUs. ValueError saying there is no CUDA device
// when this process sees none.
int default_device(std::string_view op, int rank);

}  // namespace thd::detail::nccl
