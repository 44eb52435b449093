# Sourced by scripts/test --sanitize: the sanitizer runtimes' options for every
# process the suite starts (they inherit the environment), with the suppressions of
# tests/sanitizers/ (third-party libraries only: thd's own findings are fixed).

thd_sanitizer_env() {
  local list=",$1," supp
  supp="$(pwd)/tests/sanitizers"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
  if [[ "$list" == *,address,* ]]; then
    # Leaks are checked at every process's exit; MPI, UCX and libfabric keep
    # allocations for the life of the process by design.
    export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=0"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
    # UCX's libucm patches the code of mmap (a jmp over its first bytes) while the
    # libraries load, and under ASan mmap is ASan's interceptor: an OpenBLAS server
    # thread starting up called it mid-patch and crashed at __interceptor_mmap+0x4
    # (once in CI, Secrets.ADefaultJobListensOnLoopbackOnly, under load).
    # docs/reliability.md has the details. thd registers no memory with UCX through
    # these hooks.
    export UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none
  fi
  if [[ "$list" == *,thread,* ]]; then
    export TSAN_OPTIONS="suppressions=$supp/tsan.supp:halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=0"
    # UCX's memory hooks (libucm) patch malloc and mmap under TSan's own and crash it;
    # thd registers no memory with UCX through them.
    export UCX_MEM_EVENTS=no UCX_MEM_MALLOC_HOOKS=no UCX_MEM_MMAP_HOOK_MODE=none
  fi
}
