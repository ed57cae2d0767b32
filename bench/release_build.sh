# Sourced by the benchmark scripts that time the engine: configures the
# build folder in Release if it has no configuration yet and refuses one
# configured otherwise, since its timings would mislead; and runs a
# benchmark program built on oneDNN with the engine's thread settings.
#
#   release_build <script name> <build folder>
#   run_onednn_bench <script name> <build folder> <target> [arguments...]
release_build() {
  local name=$1 build=$2 root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  if [[ ! -f "$build/CMakeCache.txt" ]]; then
    local generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release
  fi
  local build_type
  build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")
  if [[ $build_type != Release ]]; then
    echo "$name: $build is configured as '$build_type', not Release; timings would mislead." >&2
    echo "$name: reconfigure it (cmake -DCMAKE_BUILD_TYPE=Release) or set POSEIDON_BUILD_DIR." >&2
    exit 2
  fi
}

run_onednn_bench() {
  local name=$1 build=$2 target=$3 log
  shift 3
  release_build "$name" "$build"
  if ! log=$(cmake --build "$build" --target "$target" 2>&1); then
    echo "$log" >&2
    echo "$name: the benchmark needs oneDNN (libdnnl-dev)" >&2
    exit 1
  fi
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-3000} exec "$build/$target" "$@"
}
