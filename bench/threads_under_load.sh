#!/usr/bin/env bash
# How the engine's training step behaves when it shares its cores with
# another busy process: `poseidon time` on one model under OpenMP settings
# (thread count, OMP_WAIT_POLICY, GOMP_SPINCOUNT), each run once with the
# machine as it is and once with `yes > /dev/null` pinned to the last CPU.
# The variants alternate round by round so that other work on the machine
# slows them alike; the table gives each variant's fastest round.
# Usage: bench/threads_under_load.sh [model.yaml] [batch] [rounds] [poseidon time options...]
# (e.g. --precision bf16)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
binary=${POSEIDON:-$root/build/poseidon}
model=${1:-$root/models/vgg_small.yaml}
batch=${2:-32}
rounds=${3:-3}
shift $(($# < 3 ? $# : 3))
extra=("$@")
cpus=$(nproc)
busy_cpu=$((cpus - 1))

# name | threads | environment
variants=(
  "1 thread|1|"
  "$cpus threads, the engine's own choice (nothing set)|$cpus|"
  "$cpus threads, libgomp default (GOMP_SPINCOUNT=300000)|$cpus|GOMP_SPINCOUNT=300000"
  "$cpus threads, OMP_WAIT_POLICY=active|$cpus|OMP_WAIT_POLICY=active"
  "$cpus threads, OMP_WAIT_POLICY=passive|$cpus|OMP_WAIT_POLICY=passive"
  "$cpus threads, GOMP_SPINCOUNT=3000|$cpus|GOMP_SPINCOUNT=3000"
  "$cpus threads, GOMP_SPINCOUNT=10000|$cpus|GOMP_SPINCOUNT=10000"
)

# Each variant states its settings: where none is set the engine picks its own.
run_one() {  # threads env... -> ms per iteration
  local threads=$1; shift
  env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u OMP_NUM_THREADS "$@" \
    "$binary" time "$model" --batch "$batch" --iters 5 --warmup 2 --threads "$threads" "${extra[@]}" --json |
    python3 -c 'import json, sys; print(round(json.load(sys.stdin)["iteration_ms"], 1))'
}

declare -A best
hog=""
cleanup() { [[ -n $hog ]] && kill "$hog" 2>/dev/null; true; }
trap cleanup EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((r = 1; r <= rounds; ++r)); do
  for load in as-is busy; do
    if [[ $load == busy ]]; then
      taskset -c "$busy_cpu" yes >/dev/null &
      hog=$!
    fi
    for v in "${variants[@]}"; do
      IFS='|' read -r name threads envs <<<"$v"
      # shellcheck disable=SC2086
      ms=$(run_one "$threads" $envs)
      key="$load|$name"
      if [[ -z ${best[$key]:-} ]] || awk "BEGIN{exit !($ms < ${best[$key]})}"; then best[$key]=$ms; fi
      echo "round $r, $load, $name: $ms ms" >&2
    done
    cleanup
    hog=""
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo
echo "$(basename "$model") batch $batch ${extra[*]}, fastest of $rounds rounds, ms per iteration:"
echo
echo "| variant | machine as it is | one CPU busy with yes |"
echo "|---|---:|---:|"
for v in "${variants[@]}"; do
  IFS='|' read -r name _ _ <<<"$v"
  echo "| $name | ${best[as-is|$name]} | ${best[busy|$name]} |"
done
