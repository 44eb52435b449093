# The schema of a build without test hooks carries no test-only op, and flatc
# compiles both schemas with the production ops at the same union values.
# cmake -DSOURCE_DIR=<repo> -DFLATC=<flatc> -DWORK_DIR=<dir> -P check_protocol_schema.cmake
include(${SOURCE_DIR}/cmake/ThdProtocolSchema.cmake)
file(REMOVE_RECURSE ${WORK_DIR})
foreach(hooks IN ITEMS OFF ON)
  set(dir ${WORK_DIR}/${hooks})
  thd_protocol_schema(${SOURCE_DIR}/protocol/thd_protocol.fbs ${SOURCE_DIR}/protocol/test_hooks.fbs ${hooks}
    ${dir}/thd_protocol.fbs)
  execute_process(COMMAND ${FLATC} --cpp --scoped-enums -o ${dir} ${dir}/thd_protocol.fbs
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "flatc refused the schema with test hooks ${hooks}: ${err}")
  endif()
  file(READ ${dir}/thd_protocol.fbs schema_${hooks})
  file(READ ${dir}/thd_protocol_generated.h header_${hooks})
  if(NOT header_${hooks} MATCHES "  TraceDump = 40,\n" OR NOT header_${hooks} MATCHES "  ToDevice = 42,\n")
    message(FATAL_ERROR "with test hooks ${hooks}, the production ops moved in union Op")
  endif()
endforeach()
if(schema_OFF MATCHES "TestLatch" OR header_OFF MATCHES "TestLatch")
  message(FATAL_ERROR "the schema without test hooks carries TestLatch")
endif()
if(NOT header_ON MATCHES "  TestLatch = 41,\n")
  message(FATAL_ERROR "the schema with test hooks lacks TestLatch at 41")
endif()
