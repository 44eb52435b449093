# Sourced by scripts/quickstart and scripts/test: configures build/ (only when it is
# new or the requested arguments changed; after that the generated build re-runs
# CMake by itself when a CMakeLists.txt changes) and builds it.
# Extra CMake arguments come from THD_CMAKE_ARGS.

thd_build() {
  local build_dir=$1
  shift
  local extra_cmake_args
  read -r -a extra_cmake_args <<<"${THD_CMAKE_ARGS:-}"
  local cmake_args=(-G Ninja -DTHD_BUILD_TESTS=ON -DTHD_BUILD_EXAMPLES=ON "$@" "${extra_cmake_args[@]}")
  local stamp="$build_dir/.thd-configure-args"
  if [[ ! -f "$build_dir/build.ninja" || ! -f "$stamp" || "$(<"$stamp")" != "${cmake_args[*]}" ]]; then
    cmake -S . -B "$build_dir" "${cmake_args[@]}"
    printf '%s\n' "${cmake_args[*]}" >"$stamp"
  fi
  cmake --build "$build_dir" -j"$(nproc)"
}
