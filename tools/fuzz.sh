#!/usr/bin/env bash
# Fuzzing: builds the libFuzzer targets of tests/fuzz with clang (ASan +
# UBSan) into build-fuzz/ (or $FUZZ_BUILD_DIR) and runs each for N seconds.
#   tools/fuzz.sh [seconds] [target...]   run (default 60 s, every target)
#   tools/fuzz.sh --merge [target...]     fold what runs found into tests/fuzz/corpus
# A run reads tests/fuzz/corpus/<target>/ and writes new inputs to
# build-fuzz/found/<target>/ (never to the source tree); crashes, hangs and
# sanitizer reports are saved as build-fuzz/artifacts/<target>-* and make the
# script fail. Not part of CI.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
all=(model_yaml train_config overrides idx safetensors image_list)

merge=0
seconds=60
if [ "${1:-}" = "--merge" ]; then
  merge=1
  shift
elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then
  seconds="$1"
  shift
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

# The build's packages, and clang with its fuzzer runtime and OpenMP.
"$root/tools/deps.sh" "$root/tools/packages.txt" clang libclang-rt-14-dev libomp-14-dev
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPOSEIDON_FUZZ=ON \
  -DPOSEIDON_TESTS=OFF -DPOSEIDON_CUDA=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" $(printf -- '--target fuzz_%s ' "${targets[@]}")

mkdir -p "$build/found" "$build/artifacts" "$build/logs"
status=0
for t in "${targets[@]}"; do
  corpus="$root/tests/fuzz/corpus/$t"
  found="$build/found/$t"
  mkdir -p "$corpus" "$found"
  dict=()
  case $t in
    model_yaml | train_config | overrides) dict=(-dict="$root/tests/fuzz/dict/yaml.dict") ;;
    safetensors) dict=(-dict="$root/tests/fuzz/dict/safetensors.dict") ;;
  esac
  if [ $merge = 1 ]; then
    # Keeps only inputs that add coverage; the committed corpus stays small.
    "$build/tests/fuzz/fuzz_$t" -merge=1 "${dict[@]}" "$corpus" "$found" 2>&1 | tail -n 2
    continue
  fi
  echo "== fuzz_$t for ${seconds}s (log: $build/logs/$t.log)"
  if "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2560 \
    -max_len=16384 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" "${dict[@]}" \
    "$found" "$corpus" >"$build/logs/$t.log" 2>&1; then
    grep -E '^#[0-9]+.*(DONE|pulse)' "$build/logs/$t.log" | tail -n 1
    grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$build/logs/$t.log"
  else
    status=1
    echo "fuzz_$t FAILED:" >&2
    tail -n 40 "$build/logs/$t.log" >&2
  fi
done
exit $status
