# FlatBuffers: the protocol layer's schemas are compiled by flatc at build time into
# <name>_generated.h headers; nothing generated is checked in.
find_package(FlatBuffers REQUIRED CONFIG)

# thd_flatbuffers_library(<target> <schema.fbs>...): an INTERFACE target whose users
# can include "<schema>_generated.h" (regenerated whenever a schema or flatc changes)
# and get the FlatBuffers runtime headers.
function(thd_flatbuffers_library target)
  set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/${target}_generated)
  set(headers)
  foreach(schema IN LISTS ARGN)
    get_filename_component(name ${schema} NAME_WE)
    get_filename_component(path ${schema} ABSOLUTE)
    set(header ${out_dir}/${name}_generated.h)
    add_custom_command(
      OUTPUT ${header}
      COMMAND flatbuffers::flatc --cpp --scoped-enums -o ${out_dir} ${path}
      DEPENDS ${path} flatbuffers::flatc
      COMMENT "flatc: generating ${name}_generated.h"
      VERBATIM)
    list(APPEND headers ${header})
  endforeach()
  add_custom_target(${target}_codegen DEPENDS ${headers})
  add_library(${target} INTERFACE)
  add_dependencies(${target} ${target}_codegen)
  target_include_directories(${target} SYSTEM INTERFACE ${out_dir})
  target_link_libraries(${target} INTERFACE flatbuffers::flatbuffers)
endfunction()
