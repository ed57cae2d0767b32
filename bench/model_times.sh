#!/usr/bin/env bash
# `poseidon time` for each benchmark model, at its real size (batch 1 or 2,
# so that it runs on a CPU) and at a reduced size, with the peak resident
# memory of each run (GNU time's maximum RSS) and the share of the iteration
# the solver.check_finite scan takes. Prints a Markdown table for
# docs/BENCHMARK_HISTORY.md. POSEIDON_BUILD_DIR picks the build folder (Release).
#   bench/model_times.sh [iters]     (default 3 timed iterations, 1 warm-up)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${POSEIDON_BUILD_DIR:-$root/build}
iters=${1:-3}
[[ -x /usr/bin/time ]] || "$root/tools/deps.sh" time
cmake --build "$build" --target poseidon >/dev/null
cd "$root"

# name | model file | batch | overrides
runs=(
  "vgg19 224|models/vgg19.yaml|2|"
  "vgg19 32|models/vgg19.yaml|16|--set vars.size=32"
  "vgg19_22k 224|models/vgg19_22k.yaml|2|"
  "vgg19_22k 32|models/vgg19_22k.yaml|16|--set vars.size=32"
  "inception_v3 299 (aux)|models/inception_v3.yaml|2|"
  "inception_v3 75, 10 classes|models/inception_v3.yaml|16|--set vars.size=75 --set vars.aux=false --set vars.num_classes=10"
  "resnet50 224|models/resnet50.yaml|2|"
  "resnet50 64|models/resnet50.yaml|16|--set vars.size=64"
)

echo "$(date -u +%F), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $iters iterations after 1 warm-up"
echo
echo "| model, input | batch | forward ms | backward ms | update ms | finite check | img/s | peak RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for run in "${runs[@]}"; do
  IFS='|' read -r name model batch overrides <<<"$run"
  json=$(mktemp)
  rss=$(mktemp)
  # shellcheck disable=SC2086  # the overrides are separate words
  /usr/bin/time -f '%M' -o "$rss" "$build/poseidon" time "$model" $overrides --batch "$batch" --iters "$iters" \
    --warmup 1 --json >"$json"
  python3 - "$json" "$rss" "$name" "$batch" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
rss_mib = int(open(sys.argv[2]).read().split()[-1]) / 1024
print(f"| {sys.argv[3]} | {sys.argv[4]} | {t['forward_ms']:.0f} | {t['backward_ms']:.0f} | "
      f"{t['update_ms']:.0f} | {t['check_finite_ms']:.1f} ms ({t['check_finite_ms'] / t['iteration_ms']:.2%}) | "
      f"{t['images_per_sec']:.2f} | {rss_mib:.0f} |")
EOF
  rm -f "$json" "$rss"
done
