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

# --list names every suite.
run_bench(out rc err --list)
if(NOT rc EQUAL 0 OR NOT out MATCHES "(^|\n)tensor " OR NOT out MATCHES "(^|\n)datachannel ")
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

# The datachannel suite in tiny mode: thd-bench launches two ranks of itself, rank 0
# measures, the launcher prints. No MPI reference under --quick.
run_bench(out rc err datachannel --quick -n 2)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "thd-bench datachannel --quick -n 2 exited with ${rc}:\n${out}${err}")
endif()
check_lines("${out}" names)
foreach(required
        "dc\\.tcp\\.p2p\\.rtt\\.8B" "ref\\.tcp\\.p2p\\.rtt\\.8B" "ratio\\.dc\\.tcp\\.p2p\\.rtt"
        "dc\\.tcp\\.p2p\\.bw\\.[0-9]+[KM]iB" "ref\\.tcp\\.p2p\\.bw\\.[0-9]+[KM]iB"
        "ratio\\.dc\\.tcp\\.p2p\\.bw"
        "dc\\.tcp\\.allreduce\\.f16\\.n2\\.[0-9]+[KM]iB\\.busbw"
        "dc\\.tcp\\.broadcast\\.n2\\.[0-9]+[KM]iB\\.busbw"
        "dc\\.tcp\\.allreduce\\.latency\\.n2\\.32B" "dc\\.tcp\\.allreduce\\.async\\.latency\\.n2\\.32B")
  if(NOT out MATCHES "(^|\n)${required} ")
    message(FATAL_ERROR "datachannel --quick: no figure matching '${required}' in:\n${out}")
  endif()
endforeach()
# all_reduce at three sizes.
string(REGEX MATCHALL "(^|\n)dc\\.tcp\\.allreduce\\.n2\\.[0-9]+[KM]iB\\.busbw " allreduce_lines "${out}")
list(LENGTH allreduce_lines allreduce_count)
if(NOT allreduce_count EQUAL 3)
  message(FATAL_ERROR "datachannel --quick: expected 3 all_reduce figures, got ${allreduce_count}:\n${out}")
endif()
if(out MATCHES "mpi")
  message(FATAL_ERROR "datachannel --quick ran the MPI reference:\n${out}")
endif()

# The mpi backend: the ranks are one mpirun job; the same figures under its name.
if(THD_BENCH_MPI)
  run_bench(out rc err datachannel --quick -n 2 --backend mpi)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "thd-bench datachannel --quick -n 2 --backend mpi exited with ${rc}:\n${out}${err}")
  endif()
  check_lines("${out}" names)
  foreach(required "dc\\.mpi\\.p2p\\.rtt\\.8B" "ratio\\.dc\\.mpi\\.p2p\\.bw" "dc\\.mpi\\.allreduce\\.n2\\.")
    if(NOT out MATCHES "(^|\n)${required}")
      message(FATAL_ERROR "datachannel --quick --backend mpi: no figure matching '${required}' in:\n${out}")
    endif()
  endforeach()
endif()

# The ucx backend: its round trip next to raw UCX, timed in the same repetitions.
if(THD_BENCH_UCX)
  run_bench(out rc err datachannel --quick -n 2 --backend ucx --filter rtt)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "thd-bench datachannel --quick -n 2 --backend ucx exited with ${rc}:\n${out}${err}")
  endif()
  check_lines("${out}" names)
  foreach(required "dc\\.ucx\\.p2p\\.rtt\\.8B" "ref\\.raw_ucx\\.p2p\\.rtt\\.8B"
                   "ratio\\.dc\\.ucx\\.p2p\\.rtt\\.vs_raw_ucx")
    if(NOT out MATCHES "(^|\n)${required} ")
      message(FATAL_ERROR "datachannel --quick --backend ucx: no figure matching '${required}' in:\n${out}")
    endif()
  endforeach()
endif()

# --filter reaches the ranks: only the broadcast figure.
run_bench(out rc err datachannel --quick -n 2 --filter broadcast)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^dc\\.tcp\\.broadcast\\.n2\\.[0-9]+[KM]iB\\.busbw [0-9.]+ GB/s\n$")
  message(FATAL_ERROR "datachannel --quick --filter broadcast (exit ${rc}): expected the broadcast figure "
                      "alone, got:\n${out}${err}")
endif()

# A rank that fails (here: every rank, on a backend that does not exist) fails the
# run, and the launcher names the rank.
run_bench(out rc err datachannel --quick -n 2 --backend no-such-backend)
if(rc EQUAL 0 OR NOT err MATCHES "rank [01] of 2 exited with code [1-9]")
  message(FATAL_ERROR "datachannel with a bad backend: expected a failure naming a rank, got exit ${rc}:\n"
                      "${out}${err}")
endif()

# Suite options are checked: one rank is not a job.
run_bench(out rc err datachannel --quick -n 1)
if(rc EQUAL 0 OR NOT err MATCHES "-n must be an integer in 2\\.\\.")
  message(FATAL_ERROR "datachannel -n 1: expected an error, got exit ${rc}:\n${err}")
endif()

# An option of another suite is an error.
run_bench(out rc err tensor --quick -n 2)
if(rc EQUAL 0 OR NOT err MATCHES "unknown option '-n'")
  message(FATAL_ERROR "tensor -n 2: expected an unknown-option error, got exit ${rc}:\n${err}")
endif()

# The dispatch suite in tiny mode: thd-bench is the master and starts a worker and a
# reference peer, both copies of itself.
run_bench(out rc err --list)
if(NOT out MATCHES "(^|\n)dispatch ")
  message(FATAL_ERROR "thd-bench --list does not name the dispatch suite:\n${out}")
endif()
run_bench(out rc err dispatch --quick)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "thd-bench dispatch --quick exited with ${rc}:\n${out}${err}")
endif()
check_lines("${out}" names)
foreach(required
        "mw\\.dispatch\\.async [0-9.]+ ops/s" "mw\\.sync\\.rtt [0-9.]+ us" "ref\\.tcp\\.p2p\\.rtt\\.8B [0-9.]+ us"
        "ratio\\.mw\\.sync\\.rtt [0-9.]+ x"
        "mw\\.copy\\.to_worker\\.[0-9]+[KM]iB [0-9.]+ GB/s" "mw\\.copy\\.from_worker\\.[0-9]+[KM]iB [0-9.]+ GB/s"
        "ref\\.tcp\\.p2p\\.bw\\.[0-9]+[KM]iB [0-9.]+ GB/s"
        "ratio\\.mw\\.copy\\.to_worker [0-9.]+ x" "ratio\\.mw\\.copy\\.from_worker [0-9.]+ x"
        "ref\\.local\\.ops [0-9.]+ ops/s" "mw\\.graph\\.replay\\.ops [0-9.]+ ops/s"
        "ratio\\.mw\\.graph\\.replay\\.local [0-9.]+ x" "ratio\\.mw\\.graph\\.replay\\.eager [0-9.]+ x")
  if(NOT out MATCHES "(^|\n)${required}\n")
    message(FATAL_ERROR "dispatch --quick: no line matching '${required}' in:\n${out}")
  endif()
endforeach()

# --filter reaches the peer too (both must skip the same figures): the round-trip
# group alone.
run_bench(out rc err dispatch --quick --filter rtt)
if(NOT rc EQUAL 0 OR NOT out MATCHES
   "^mw\\.sync\\.rtt [0-9.]+ us\nref\\.tcp\\.p2p\\.rtt\\.8B [0-9.]+ us\nratio\\.mw\\.sync\\.rtt [0-9.]+ x\n$")
  message(FATAL_ERROR "dispatch --quick --filter rtt (exit ${rc}): expected the round-trip group alone, got:\n"
                      "${out}${err}")
endif()

# The graphs suite in tiny mode: the master, three workers and the reference peer.
run_bench(out rc err graphs --quick)
if(NOT rc EQUAL 0 OR NOT out MATCHES
   "^mw\\.eager\\.step [0-9.]+ us\nmw\\.graph\\.step [0-9.]+ us\nratio\\.mw\\.graph\\.step [0-9.]+ x\n$")
  message(FATAL_ERROR "graphs --quick (exit ${rc}): expected the step figures, got:\n${out}${err}")
endif()

# The streams suite in tiny mode: the master, two workers and the reference peer.
run_bench(out rc err streams --quick)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "thd-bench streams --quick exited with ${rc}:\n${out}${err}")
endif()
check_lines("${out}" names)
foreach(required
        "streams\\.event\\.cross_node\\.latency [0-9.]+ us" "ref\\.tcp\\.p2p\\.rtt\\.8B [0-9.]+ us"
        "ratio\\.streams\\.event\\.cross_node [0-9.]+ x" "streams\\.one_stream [0-9.]+ ms"
        "streams\\.two_streams [0-9.]+ ms" "streams\\.overlap\\.ratio [0-9.]+ x")
  if(NOT out MATCHES "(^|\n)${required}\n")
    message(FATAL_ERROR "streams --quick: no line matching '${required}' in:\n${out}")
  endif()
endforeach()

# The worker's-GPU suite: its figures where there is a GPU, a note on stderr and no
# figure where there is none (CI).
run_bench(out rc err mw-cuda --quick)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "thd-bench mw-cuda --quick exited with ${rc}:\n${out}${err}")
endif()
if(err MATCHES "skipped: no CUDA device")
  if(NOT out STREQUAL "")
    message(FATAL_ERROR "mw-cuda --quick said it skipped but printed figures:\n${out}")
  endif()
else()
  check_lines("${out}" names)
  foreach(required
          "mw\\.cuda\\.dispatch\\.async [0-9.]+ ops/s" "mw\\.cuda\\.copy\\.to_worker\\.1MiB [0-9.]+ GB/s"
          "ref\\.cuda\\.h2d\\.1MiB [0-9.]+ GB/s" "ratio\\.mw\\.cuda\\.copy\\.to_worker [0-9.]+ x")
    if(NOT out MATCHES "(^|\n)${required}\n")
      message(FATAL_ERROR "mw-cuda --quick: no line matching '${required}' in:\n${out}")
    endif()
  endforeach()
endif()

# The hidden role option is checked.
run_bench(out rc err dispatch --quick --role no-such-role)
if(rc EQUAL 0 OR NOT err MATCHES "--role must be worker or peer")
  message(FATAL_ERROR "dispatch --role no-such-role: expected an error, got exit ${rc}:\n${err}")
endif()
