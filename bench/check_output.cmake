# ctest bench.smoke: runs thd-bench in --quick mode and checks what it prints, not how
# fast anything is. Usage: cmake -DTHD_BENCH=<path to thd-bench> -P check_output.cmake

if(NOT THD_BENCH)
  message(FATAL_ERROR "pass -DTHD_BENCH=<path to thd-bench>")
endif()

# One figure per line: name, a non-negative decimal, a unit.
set(line_re "^[A-Za-z0-9_.]+ [0-9]+\\.[0-9]+ [A-Za-z/]+$")

function(run_bench out_var rc_var err_var)
  execute_process(COMMAND ${THD_BENCH} ${ARGN}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  set(${out_var} "${out}" PARENT_SCOPE)
  set(${rc_var} "${rc}" PARENT_SCOPE)
  set(${err_var} "${err}" PARENT_SCOPE)
endfunction()

# Checks every line of `text` against line_re; returns the figure names in names_var.
function(check_lines text names_var)
  string(REGEX REPLACE "\n$" "" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(names "")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "${line_re}")
      message(FATAL_ERROR "badly formed figure line: '${line}'\nfull output:\n${text}")
    endif()
    string(REGEX MATCH "^[^ ]+" name "${line}")
    list(APPEND names "${name}")
  endforeach()
  set(${names_var} "${names}" PARENT_SCOPE)
endfunction()

# --list names the tensor suite.
run_bench(out rc err --list)
if(NOT rc EQUAL 0 OR NOT out MATCHES "(^|\n)tensor ")
  message(FATAL_ERROR "thd-bench --list failed (exit ${rc}):\n${out}${err}")
endif()

# The whole tensor suite in tiny mode.
run_bench(out rc err tensor --quick)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "thd-bench tensor --quick exited with ${rc}:\n${out}${err}")
endif()
check_lines("${out}" names)
foreach(required
        "tensor\\.add\\.f32\\.[0-9]+[KM]iB" "ref\\.stream_add\\.f32\\.[0-9]+[KM]iB"
        "tensor\\.sum\\.f32\\.[0-9]+[KM]iB" "tensor\\.matmul\\.f32\\.[0-9]+"
        "ref\\.sgemm\\.f32\\.[0-9]+" "ratio\\.add" "ratio\\.matmul")
  if(NOT out MATCHES "(^|\n)${required} ")
    message(FATAL_ERROR "no figure matching '${required}' in:\n${out}")
  endif()
endforeach()

# --filter keeps the figures whose name or group matches: all of the matmul group
# (thd, the sgemm reference, the ratio) and nothing else.
run_bench(out rc err tensor --quick --filter matmul)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "thd-bench tensor --quick --filter matmul exited with ${rc}:\n${err}")
endif()
check_lines("${out}" names)
foreach(required "tensor\\.matmul\\.f32\\." "ref\\.sgemm\\.f32\\." "ratio\\.matmul ")
  if(NOT out MATCHES "(^|\n)${required}")
    message(FATAL_ERROR "--filter matmul: no figure matching '${required}' in:\n${out}")
  endif()
endforeach()
foreach(name IN LISTS names)
  if(name MATCHES "add|sum|bmm")
    message(FATAL_ERROR "--filter matmul printed '${name}'")
  endif()
endforeach()

# An unknown suite is an error that lists the available ones.
run_bench(out rc err no-such-suite)
if(rc EQUAL 0 OR NOT err MATCHES "available suites: .*tensor")
  message(FATAL_ERROR "unknown suite: expected an error listing 'tensor', got exit ${rc}:\n${err}")
endif()
