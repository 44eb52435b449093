// Collectives a backend's own library runs on host memory, for the calls where it
// is faster than thd's algorithms over point-to-point (collectives/). The mpi
// backend's are Open MPI's or MPICH's own (datachannel/mpi/mpi_host_collectives.h).
//
// A backend that has them returns them from Transport::host_collectives(); the
// algorithm dispatch (collectives/select.cpp) offers each call to them first and
// runs its own algorithm when they decline it.
#pragma once

#include <cstddef>

#include <thd/datachannel.h>
#include <thd/dtype.h>

namespace thd::detail {

class Comm;

class HostCollectives {
 public:
  virtual ~HostCollectives() = default;
  // all_reduce of `count` elements at `data`, in place, among comm's group: false
  // when the library does not take this call (group, tag, dtype, op, size) and
  // nothing was done; true when it ran it. Throws as thd's algorithms do:
  // ValueError/TypeError naming both calls when the members disagree, TimeoutError
  // at comm.deadline(); `data` is not written after it throws.
  virtual bool all_reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op) = 0;
  // broadcast of `nbytes` at `data` from group rank `root`; all_gather of
  // `nbytes_per_rank` from `in` into `out` (group-rank order); barrier: as above.
  virtual bool broadcast(Comm& comm, void* data, size_t nbytes, int root) = 0;
  virtual bool all_gather(Comm& comm, const void* in, void* out, size_t nbytes_per_rank) = 0;
  // all_to_all of `nbytes_per_rank` blocks; reduce_scatter of `count_per_rank`
  // elements a rank (`in` holds the group's size times that): as above.
  virtual bool all_to_all(Comm& comm, const void* in, void* out, size_t nbytes_per_rank) = 0;
  virtual bool reduce_scatter(Comm& comm, const void* in, void* out, size_t count_per_rank, DType dtype,
                              ReduceOp op) = 0;
  virtual bool barrier(Comm& comm) = 0;
};

}  // namespace thd::detail
