#!/usr/bin/env bash
# Sends SIGTERM to `poseidon train` (LeNet on synthetic data) at a random
# moment after training starts, N times, with two busy loops loading the
# cores, and counts the runs that did not stop cleanly (docs/FAILURES.md:
# a handler run on a computing thread once corrupted the heap in some).
#   tools/stop_signal_stress.sh [N] [POSEIDON_BINARY]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
runs="${1:-200}"
binary="${2:-$root/build/poseidon}"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
cat >"$work/config.yaml" <<YAML
model: $root/models/lenet.yaml
seed: 2
threads: 1
data: {train: {source: synthetic, shape: [1, 28, 28], num_classes: 10, size: 100000, batch_size: 16}}
solver: {lr: 0.01, momentum: 0.9, max_iter: 100000}
train: {display: 1, output_dir: $work/run}
YAML
for _ in 1 2; do (while :; do :; done) & done
failed=0
for i in $(seq 1 "$runs"); do
  rm -rf "$work/run"
  "$binary" train "$work/config.yaml" --quiet >"$work/out" 2>&1 &
  pid=$!
  until grep -q '"train"' "$work/run/metrics.jsonl" 2>/dev/null; do sleep 0.02; done
  sleep "0.0$((RANDOM % 10))"
  kill -TERM "$pid"
  status=0
  wait "$pid" || status=$?
  if [ $status != 0 ]; then
    failed=$((failed + 1))
    echo "run $i: status $status: $(tail -1 "$work/out")"
  fi
done
echo "$failed of $runs runs did not stop cleanly"
[ $failed = 0 ]
