#include "datachannel/mpi/mpi_transport.h"

#include "datachannel/mpi/mpi_pipe.h"
#include "datachannel/pipe/pipe_transport.h"

namespace thd::detail::mpi {

std::shared_ptr<Transport> make_transport(const DataChannelOptions& options) {
  const pipe::PipeTuning tuning = pipe::pipe_tuning_from_env();
  return std::make_shared<pipe::PipeTransport>(make_pipe(options), tuning);
}

}  // namespace thd::detail::mpi
