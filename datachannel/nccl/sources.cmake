# The nccl backend (datachannel/nccl/), built with THD_WITH_NCCL.
set(THD_DC_NCCL_SOURCES
  nccl/nccl_backend.cpp
  nccl/nccl_collectives.cpp
  nccl/nccl_communicator.cpp
  nccl/nccl_device.cpp
  nccl/nccl_error.cpp
  nccl/nccl_rendezvous.cpp
  nccl/nccl_runner.cpp
  nccl/nccl_types.cpp
)
