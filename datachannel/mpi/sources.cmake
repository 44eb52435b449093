# The mpi backend's sources, relative to datachannel/.
set(THD_DC_MPI_SOURCES
  mpi/mpi_host_collectives.cpp
  mpi/mpi_library.cpp
  mpi/mpi_pipe.cpp
  mpi/mpi_rendezvous.cpp
  mpi/mpi_wait.cpp
)
