# Sourced by scripts/quickstart and scripts/test: configures build/ (only when it is
# new or the requested arguments changed; after that the generated build re-runs
# CMake by itself when a CMakeLists.txt changes) and builds it.
# Extra CMake arguments come from THD_CMAKE_ARGS.

# The GPUs to build CUDA kernels for: THD_CUDA_ARCHITECTURES when set; else this
# machine's own GPUs ("native") when it has any; else only sm_90. Without a GPU the
# kernels are only compiled, never run (CI), and one architecture keeps that part of
# the build to minutes; a plain cmake build still targets sm_80 and sm_90.
thd_cuda_architectures() {
  if [[ -n "${THD_CUDA_ARCHITECTURES:-}" ]]; then
    echo "$THD_CUDA_ARCHITECTURES"
  elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo native
  else
    echo 90
  fi
}

thd_build() {
  local build_dir=$1
  shift
  local extra_cmake_args
  read -r -a extra_cmake_args <<<"${THD_CMAKE_ARGS:-}"
  local cmake_args=(-G Ninja -DTHD_BUILD_TESTS=ON -DTHD_BUILD_EXAMPLES=ON
                    -DTHD_CUDA_ARCHITECTURES="$(thd_cuda_architectures)" "$@" "${extra_cmake_args[@]}")
  local stamp="$build_dir/.thd-configure-args"
  if [[ ! -f "$build_dir/build.ninja" || ! -f "$stamp" || "$(<"$stamp")" != "${cmake_args[*]}" ]]; then
    cmake -S . -B "$build_dir" "${cmake_args[@]}"
    printf '%s\n' "${cmake_args[*]}" >"$stamp"
  fi
  cmake --build "$build_dir" -j"$(nproc)"
}
