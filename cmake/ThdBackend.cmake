# A DataChannel backend is a folder: its CMakeLists.txt looks up what the backend
# needs and calls thd_backend(), which owns the rest (docs/backends.md):
#
#   thd_backend(NAME <name>
#               OPTION <THD_WITH_X> FOUND <bool> FOUND_TEXT <what was found>
#               REQUIRES <what to install, for error messages>
#               | BUILTIN
#               SOURCES <file>...          relative to the folder
#               [LINK <target>...]         what the sources link (their headers too)
#               [DEFINITIONS <def>...]     compile definitions of the sources
#               [DEVICE_COLLECTIVES]       it runs collectives on device tensors
#                                          for channels of other backends (nccl)
#               [RENDEZVOUS <scheme> LAUNCHER <name> LAUNCHER_ENV <var>...]
#                                          init_method <scheme>:// is its rendezvous,
#                                          and env:// uses it in a process whose
#                                          environment has one of LAUNCHER_ENV set
#               [OUTPUT_DIRECTORY <dir> NO_INSTALL])   a module outside lib/ (tests)
#
# The sources define the entry point `extern "C" const BackendRegistration*
# thd_backend_<name>()` (datachannel/backend_registration.h).
#
# OPTION is tri-state (cmake/ThdOptions.cmake): AUTO builds the backend when FOUND,
# ON fails the configure when it is not, OFF leaves it out. The resolved 0/1 is set
# in the caller as <OPTION> (and, through thd_publish_backends, in the top level,
# where config.h gets THD_WITH_X from it).
#
# A BUILTIN backend (tcp) is compiled into thd_datachannel. With BUILD_SHARED_LIBS
# every other one is its own shared library, lib/libthd_backend_<name>.so, which the
# registry dlopens when a channel asks for it: the libraries it links (and the signal
# handlers they install when loaded) stay out of programs that do not use it. A
# static build compiles it into thd_datachannel and lists its entry point in the
# generated backend_catalog.cpp. Either way the target thd_backend_<name> is what a
# test of the backend's internals links.
function(thd_backend)
  cmake_parse_arguments(ARG "BUILTIN;DEVICE_COLLECTIVES;NO_INSTALL"
    "NAME;OPTION;FOUND;FOUND_TEXT;REQUIRES;RENDEZVOUS;LAUNCHER;OUTPUT_DIRECTORY"
    "SOURCES;LINK;DEFINITIONS;LAUNCHER_ENV" ${ARGN})
  if(NOT ARG_NAME MATCHES "^[a-z][a-z0-9_]*$")
    message(FATAL_ERROR "thd_backend: NAME must be a lower-case identifier, got '${ARG_NAME}'")
  endif()
  set(name ${ARG_NAME})
  get_property(known GLOBAL PROPERTY THD_BACKENDS)
  if(name IN_LIST known)
    message(FATAL_ERROR "thd_backend: backend '${name}' is declared twice")
  endif()
  if(ARG_BUILTIN)
    set(enabled 1)
  else()
    if(NOT ARG_OPTION)
      message(FATAL_ERROR "thd_backend(${name}): an optional backend names its OPTION (or is BUILTIN)")
    endif()
    if(NOT DEFINED CACHE{${ARG_OPTION}})
      thd_tristate_option(${ARG_OPTION} "Build the ${name} DataChannel backend")
    endif()
    thd_resolve_option(${ARG_OPTION} "${ARG_FOUND}" "${ARG_FOUND_TEXT}")
    set(enabled ${${ARG_OPTION}_ENABLED})
    set(${ARG_OPTION} ${enabled} PARENT_SCOPE)
  endif()

  set_property(GLOBAL APPEND PROPERTY THD_BACKENDS ${name})
  set_property(GLOBAL PROPERTY THD_BACKEND_${name}_OPTION "${ARG_OPTION}")
  set_property(GLOBAL PROPERTY THD_BACKEND_${name}_REQUIRES "${ARG_REQUIRES}")
  set_property(GLOBAL PROPERTY THD_BACKEND_${name}_ENABLED ${enabled})
  set_property(GLOBAL PROPERTY THD_BACKEND_${name}_DEVICE_COLLECTIVES ${ARG_DEVICE_COLLECTIVES})
  set_property(GLOBAL PROPERTY THD_BACKEND_${name}_RENDEZVOUS "${ARG_RENDEZVOUS}")
  set_property(GLOBAL PROPERTY THD_BACKEND_${name}_LAUNCHER "${ARG_LAUNCHER}")
  set_property(GLOBAL PROPERTY THD_BACKEND_${name}_LAUNCHER_ENV "${ARG_LAUNCHER_ENV}")
  if(NOT enabled)
    set_property(GLOBAL PROPERTY THD_BACKEND_${name}_LINKED 0)
    return()
  endif()

  list(TRANSFORM ARG_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  set(target thd_backend_${name})
  if(ARG_BUILTIN OR NOT BUILD_SHARED_LIBS)
    # Compiled into the core library; the registration list names its entry point.
    set_property(GLOBAL PROPERTY THD_BACKEND_${name}_LINKED 1)
    target_sources(thd_datachannel PRIVATE ${ARG_SOURCES})
    set_property(SOURCE ${ARG_SOURCES} TARGET_DIRECTORY thd_datachannel APPEND PROPERTY
      COMPILE_DEFINITIONS ${ARG_DEFINITIONS})
    if(ARG_LINK)
      target_link_libraries(thd_datachannel PRIVATE ${ARG_LINK})
    endif()
    add_library(${target} INTERFACE)
    target_link_libraries(${target} INTERFACE thd_datachannel ${ARG_LINK})
    target_compile_definitions(${target} INTERFACE ${ARG_DEFINITIONS})
    return()
  endif()

  set_property(GLOBAL PROPERTY THD_BACKEND_${name}_LINKED 0)
  # SHARED rather than MODULE: the tests of a backend's internals link it.
  add_library(${target} SHARED ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME thd_backend_${name} PREFIX lib SUFFIX .so)
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY})
  endif()
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${target} PUBLIC ${ARG_DEFINITIONS})
  target_compile_options(${target} PRIVATE
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<OR:$<CXX_COMPILER_ID:GNU>,$<CXX_COMPILER_ID:Clang>>>:-fno-semantic-interposition>)
  target_link_libraries(${target} PUBLIC thd_datachannel ${ARG_LINK} PRIVATE fmt::fmt Threads::Threads thd_warnings)
  # A symbol nothing provides fails the link, not the dlopen at run time. (Not with
  # the sanitizers, whose runtime the program brings.)
  if(NOT THD_SANITIZE AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
    target_link_options(${target} PRIVATE "LINKER:--no-undefined")
  endif()
  if(NOT ARG_NO_INSTALL)
    # Next to libthd_datachannel, where the registry looks for it.
    install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
    set_property(GLOBAL APPEND PROPERTY THD_BACKEND_MODULE_TARGETS ${target})
    if(TARGET thd_backend_modules)
      add_dependencies(thd_backend_modules ${target})
    endif()
  endif()
endfunction()

# The C++ string literal of `text`.
function(_thd_cxx_string out text)
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE "\"" "\\\"" text "${text}")
  set(${out} "\"${text}\"" PARENT_SCOPE)
endfunction()

# Writes the registration list of the backends declared so far into
# <binary dir>/backend_catalog.cpp and adds it to thd_datachannel: every backend
# thd_backend() saw (built or not, with the option that builds it), and the entry
# points of those compiled into the library.
function(thd_generate_backend_catalog)
  get_property(backends GLOBAL PROPERTY THD_BACKENDS)
  set(declarations "")
  set(linked "")
  set(entries "")
  set(restore "")
  foreach(name IN LISTS backends)
    foreach(key OPTION REQUIRES ENABLED DEVICE_COLLECTIVES RENDEZVOUS LAUNCHER LAUNCHER_ENV LINKED)
      get_property(${key} GLOBAL PROPERTY THD_BACKEND_${name}_${key})
    endforeach()
    if(LINKED AND OPTION)
      set(restore "
// The libraries of the backends linked in here load with the program, and some
// install signal handlers as they do (library_signal_handlers.cpp).
[[maybe_unused]] const bool restored_signal_handlers = (restore_library_signal_handlers(), true);
")
    endif()
    if(LINKED)
      string(APPEND declarations "extern \"C\" const thd::detail::BackendRegistration* thd_backend_${name}();\n")
      string(APPEND linked "      &thd_backend_${name},\n")
    endif()
    set(env_list "")
    foreach(var IN LISTS LAUNCHER_ENV)
      string(APPEND env_list "\"${var}\", ")
    endforeach()
    _thd_cxx_string(option_text "${OPTION}")
    _thd_cxx_string(requires_text "${REQUIRES}")
    if(DEVICE_COLLECTIVES)
      set(device true)
    else()
      set(device false)
    endif()
    if(ENABLED)
      set(built true)
    else()
      set(built false)
    endif()
    if(LINKED)
      set(in_library true)
    else()
      set(in_library false)
    endif()
    string(APPEND entries "      {\"${name}\", ${option_text}, ${requires_text}, ${built}, ${in_library}, ${device}, "
                          "\"${RENDEZVOUS}\", \"${LAUNCHER}\", {${env_list}}},\n")
  endforeach()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/backend_catalog.cpp)
  file(CONFIGURE OUTPUT ${out} @ONLY CONTENT [[
// Generated by cmake/ThdBackend.cmake from the backend folders of this build.
#include "datachannel/backend_catalog.h"
#include "datachannel/library_signal_handlers.h"

@declarations@
namespace thd::detail {
@restore@
const std::vector<KnownBackend>& known_backends() {
  static const std::vector<KnownBackend> table = {
@entries@  };
  return table;
}

const std::vector<BackendEntryPoint>& linked_backends() {
  static const std::vector<BackendEntryPoint> table = {
@linked@  };
  return table;
}

}  // namespace thd::detail
]])
  target_sources(thd_datachannel PRIVATE ${out})
endfunction()

# Sets each backend's OPTION (0/1) in the caller's parent scope, for the folders
# read after datachannel/ (tests, bench, examples) and config.h.
macro(thd_publish_backends)
  get_property(_thd_backends GLOBAL PROPERTY THD_BACKENDS)
  foreach(_thd_backend IN LISTS _thd_backends)
    get_property(_thd_option GLOBAL PROPERTY THD_BACKEND_${_thd_backend}_OPTION)
    get_property(_thd_enabled GLOBAL PROPERTY THD_BACKEND_${_thd_backend}_ENABLED)
    if(_thd_option)
      set(${_thd_option} ${_thd_enabled} PARENT_SCOPE)
    endif()
  endforeach()
endmacro()

# config.h's THD_WITH_<X> line of every optional backend (0/1), in `out`: the
# build-time test of code outside datachannel/ (THD_WITH_NCCL in worker/).
function(thd_backend_config_defines out)
  get_property(backends GLOBAL PROPERTY THD_BACKENDS)
  set(text "")
  foreach(name IN LISTS backends)
    get_property(option GLOBAL PROPERTY THD_BACKEND_${name}_OPTION)
    get_property(enabled GLOBAL PROPERTY THD_BACKEND_${name}_ENABLED)
    if(option)
      string(APPEND text "#define ${option} ${enabled}\n")
    endif()
  endforeach()
  string(REGEX REPLACE "\n$" "" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
