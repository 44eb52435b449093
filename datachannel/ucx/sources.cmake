# The ucx backend's MessagePipe, relative to datachannel/.
set(THD_DC_UCX_SOURCES
  ucx/ucx_handles.cpp
  ucx/ucx_message_pipe.cpp
  ucx/ucx_pipe.cpp
)
