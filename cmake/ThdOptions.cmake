# Optional parts: AUTO (on when the dependency is found), ON (fail hard when it
# is missing), OFF. thd_resolve_option resolves THD_WITH_<X> to 0 or 1 in
# THD_WITH_<X>_ENABLED. CUDA and Python are declared here; each DataChannel
# backend declares its own in its folder (cmake/ThdBackend.cmake).

function(thd_tristate_option name doc)
  set(${name} AUTO CACHE STRING "${doc} (AUTO, ON, OFF)")
  set_property(CACHE ${name} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${name}}" value)
  if(NOT value MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${name} must be AUTO, ON or OFF, got '${${name}}'")
  endif()
endfunction()

# thd_resolve_option(<name> <found>): sets <name>_ENABLED (0/1) in the caller.
function(thd_resolve_option name found what)
  string(TOUPPER "${${name}}" value)
  if(value STREQUAL "OFF")
    set(enabled 0)
  elseif(found)
    set(enabled 1)
  elseif(value STREQUAL "ON")
    message(FATAL_ERROR "${name}=ON but ${what} was not found. Install it "
                        "(scripts/install-deps) or configure with -D${name}=AUTO.")
  else()
    set(enabled 0)
  endif()
  set(${name}_ENABLED ${enabled} PARENT_SCOPE)
  if(enabled)
    message(STATUS "thd: ${name}: enabled (${what})")
  else()
    message(STATUS "thd: ${name}: disabled")
  endif()
endfunction()

thd_tristate_option(THD_WITH_CUDA "Build CUDA device tensors")
thd_tristate_option(THD_WITH_PYTHON "Build the Python package thd (pybind11)")
