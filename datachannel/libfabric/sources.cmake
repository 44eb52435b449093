# The libfabric backend's MessagePipe, relative to datachannel/.
set(THD_DC_LIBFABRIC_SOURCES
  libfabric/address_exchange.cpp
  libfabric/endpoint.cpp
  libfabric/fabric_pipe.cpp
  libfabric/fi_error.cpp
  libfabric/libfabric_pipe.cpp
  libfabric/memory_region.cpp
  libfabric/sleeper.cpp
)
