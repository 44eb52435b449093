# The collective algorithms, relative to datachannel/. One algorithm per file.
set(THD_DC_COLLECTIVE_SOURCES
  collectives/binomial_tree_broadcast.cpp
  collectives/binomial_tree_reduce.cpp
  collectives/comm.cpp
  collectives/dissemination_barrier.cpp
  collectives/linear_gather.cpp
  collectives/linear_scatter.cpp
  collectives/pairwise_all_to_all.cpp
  collectives/pipelined_ring_broadcast.cpp
  collectives/recursive_doubling_all_reduce.cpp
  collectives/reduce_kernels.cpp
  collectives/ring_all_gather.cpp
  collectives/ring_all_reduce.cpp
  collectives/ring_reduce.cpp
  collectives/ring_reduce_scatter.cpp
  collectives/select.cpp
)
