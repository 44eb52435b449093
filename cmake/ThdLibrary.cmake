# thd_layer_library(<target> EXPORT_NAME <name> SOURCES <file>...): one layer of thd
# (tensor, datachannel, ...) as a library: thd::<name> alias and export name,
# versioned soname, the public headers of include/thd/ (build and install trees),
# the repository root for the layers' private headers, C++20, and the project's
# warnings kept out of the exported interface. The caller adds its dependencies.
function(thd_layer_library target)
  cmake_parse_arguments(ARG "" "EXPORT_NAME" "SOURCES" ${ARGN})
  add_library(${target} ${ARG_SOURCES})
  add_library(thd::${ARG_EXPORT_NAME} ALIAS ${target})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${target} EXPORT_NAME ${ARG_EXPORT_NAME}
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  target_include_directories(${target}
    PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE
      ${PROJECT_SOURCE_DIR})
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:thd_warnings>)
  # Calls between a layer's own functions bind inside the library: with -fPIC,
  # GCC otherwise routes each through the PLT (and will not inline it) so that
  # another library could interpose it, which thd never relies on. A message's
  # path crosses dozens of such calls.
  target_compile_options(${target} PRIVATE
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<OR:$<CXX_COMPILER_ID:GNU>,$<CXX_COMPILER_ID:Clang>>>:-fno-semantic-interposition>)
  # The same for calls from one source file of a layer to another: without it the
  # linker leaves each to the PLT. Functions only: data (an inline function's
  # static) stays one object across libraries.
  if(BUILD_SHARED_LIBS AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
    target_link_options(${target} PRIVATE "LINKER:-Bsymbolic-functions")
  endif()
endfunction()
