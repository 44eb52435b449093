# THD_SANITIZE: the sanitizers every target of this build is compiled and linked
# with, as -fsanitize takes them: "address,undefined" or "thread" (scripts/test
# --sanitize). Empty: none. UBSan findings abort (no recovery), so a test that
# hits undefined behaviour fails instead of printing a line nobody reads.
set(THD_SANITIZE "" CACHE STRING "Sanitizers to build with: address,undefined | thread (see scripts/test --sanitize)")

if(THD_SANITIZE)
  string(REPLACE ";" "," _thd_sanitize "${THD_SANITIZE}")
  string(REPLACE "," ";" _thd_sanitizers "${_thd_sanitize}")
  foreach(_s IN LISTS _thd_sanitizers)
    if(NOT _s MATCHES "^(address|undefined|thread|leak)$")
      message(FATAL_ERROR "THD_SANITIZE: unknown sanitizer '${_s}' in '${THD_SANITIZE}' "
                          "(known: address, undefined, thread, leak)")
    endif()
  endforeach()
  if("thread" IN_LIST _thd_sanitizers AND ("address" IN_LIST _thd_sanitizers OR "leak" IN_LIST _thd_sanitizers))
    message(FATAL_ERROR "THD_SANITIZE: thread cannot be combined with address or leak ('${THD_SANITIZE}')")
  endif()
  if(THD_BUILD_FUZZERS)
    message(FATAL_ERROR "THD_SANITIZE and THD_BUILD_FUZZERS are separate builds: the fuzz build has its own sanitizers")
  endif()
  # C and C++ only: nvcc does not take -fsanitize (a sanitizer build leaves CUDA off,
  # scripts/test --sanitize; its host code would run uninstrumented otherwise).
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${_thd_sanitize};-fno-omit-frame-pointer>")
  # GCC's flow analysis sees through the sanitizers' instrumentation badly: it warns
  # of uninitialized reads inside libstdc++ (std::regex, std::function) that the
  # plain build does not have, and -Werror makes those fatal.
  add_compile_options($<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-maybe-uninitialized>)
  add_link_options(-fsanitize=${_thd_sanitize})
  if("undefined" IN_LIST _thd_sanitizers)
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=undefined>)
  endif()
  message(STATUS "thd: sanitizers: ${_thd_sanitize}")
endif()
