# The protocol layer's sources, relative to the repository root.
set(THD_PROTOCOL_SOURCES
  protocol/codec.cpp
  protocol/command_writer.cpp
  protocol/framing.cpp
  protocol/graph_ops.cpp
)

# The schema flatc compiles (cmake/ThdProtocolSchema.cmake): with THD_ENABLE_TEST_HOOKS,
# thd_protocol.fbs and the test-only ops of test_hooks.fbs; without, thd_protocol.fbs.
include(ThdProtocolSchema)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_LIST_DIR}/thd_protocol.fbs ${CMAKE_CURRENT_LIST_DIR}/test_hooks.fbs)
set(THD_PROTOCOL_SCHEMA ${PROJECT_BINARY_DIR}/protocol/thd_protocol.fbs)
thd_protocol_schema(${CMAKE_CURRENT_LIST_DIR}/thd_protocol.fbs ${CMAKE_CURRENT_LIST_DIR}/test_hooks.fbs
  "${THD_ENABLE_TEST_HOOKS}" ${THD_PROTOCOL_SCHEMA})
