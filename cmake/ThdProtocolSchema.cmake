# The schema flatc compiles: protocol/thd_protocol.fbs, plus, with test hooks, the
# test-only ops of protocol/test_hooks.fbs (appended, and put in union Op where the
# '@test_hook_ops@' line stands, at the values that file's '// union Op:' line names).
#
# thd_protocol_schema(<source.fbs> <test_hooks.fbs> <with_hooks> <out.fbs>) writes
# <out.fbs>, only when its text changes (flatc, and all that includes its header,
# reruns then).
function(thd_protocol_schema source hooks with_hooks out)
  file(READ ${source} schema)
  set(marker "  // @test_hook_ops@\n")
  string(FIND "${schema}" "${marker}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${source} lost the '@test_hook_ops@' line of its union Op")
  endif()
  if(with_hooks)
    file(READ ${hooks} hook_text)
    if(NOT hook_text MATCHES "// union Op: ([^\n]*)")
      message(FATAL_ERROR "${hooks} lost its '// union Op:' line")
    endif()
    string(REPLACE "${marker}" "  ${CMAKE_MATCH_1}\n" schema "${schema}")
    string(APPEND schema "\n${hook_text}")
  else()
    string(REPLACE "${marker}" "" schema "${schema}")
  endif()
  set(old "")
  if(EXISTS ${out})
    file(READ ${out} old)
  endif()
  if(NOT old STREQUAL schema)
    file(WRITE ${out} "${schema}")
  endif()
endfunction()
