#!/usr/bin/env bash
# Predicted speed-ups of VGG19-22K from `poseidon simulate`, beside the ones
# the reference design reports (PAPER.md, "Reported results": VGG19-22K at
# 40GbE, read from the authors' plotting data), then predictions for larger
# clusters. Compute comes from profiles/vgg19_22k_b32.json (PAPER.md's
# 0.925 s per iteration at batch 32, split over the layers by FLOPs).
#
# Usage: bench/simulate_table.sh [POSEIDON_BINARY] [LATENCY_US]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/poseidon}
latency=${2:-20}
model=$root/models/vgg19_22k.yaml
profile=$root/profiles/vgg19_22k_b32.json

paper=$(mktemp)
ours=$(mktemp)
large=$(mktemp)
trap 'rm -f "$paper" "$ours" "$large"' EXIT

# PAPER.md, VGG19-22K at 40GbE, speed-up at 1/2/4/8/16/32 machines.
cat >"$paper" <<'EOF'
{"hybrid wfbp": [1, 1.96, 3.83, 7.63, 15.03, 29.45],
 "ps wfbp": [1, 1.78, 3.28, 6.12, 11.56, 21.37],
 "ps no-wfbp": [1, 1.01, 1.47, 2.16, 2.82, 4.42]}
EOF

"$bin" simulate "$model" --profile "$profile" --workers 1,2,4,8,16,32 --bandwidth 40 --latency "$latency" \
  --scheme hybrid,ps --wfbp true,false --json >"$ours"
"$bin" simulate "$model" --profile "$profile" --workers 64,256,1024 --bandwidth 10,40,100 --latency "$latency" \
  --scheme hybrid,allreduce,ps --wfbp true --json >"$large"

python3 - "$paper" "$ours" "$large" <<'EOF'
import json, sys
paper = json.load(open(sys.argv[1]))
ours = json.load(open(sys.argv[2]))
large = json.load(open(sys.argv[3]))

def key(run):
    return f"{run['scheme']} {'wfbp' if run['wfbp'] else 'no-wfbp'}"

print(f"VGG19-22K, 40 Gbit/s, latency {ours['latency_us']:g} us, profile {ours['profile']}")
print("speed-up: paper (PAPER.md) / simulated")
workers = [1, 2, 4, 8, 16, 32]
print(f"{'system':<34}" + "".join(f"{p:>14}" for p in workers))
names = {"hybrid wfbp": "WFBP + HybComm", "ps wfbp": "WFBP only (PS for all layers)", "ps no-wfbp": "PS, no overlap"}
for k, label in names.items():
    sim = {r["workers"]: r["speedup"] for r in ours["runs"] if key(r) == k}
    cells = "".join(f"{p_:>7.2f} /{sim[w]:>5.2f}" for w, p_ in zip(workers, paper[k]))
    print(f"{label:<34}{cells}")

print()
print(f"Predictions (WFBP on), speed-up and efficiency, latency {large['latency_us']:g} us")
print(f"{'scheme':<10}{'Gbit/s':>8}" + "".join(f"{f'P={p}':>18}" for p in (64, 256, 1024)))
rows = {}
for r in large["runs"]:
    rows.setdefault((r["scheme"], r["bandwidth_gbps"]), {})[r["workers"]] = r
def cell(run):
    return f"{run['speedup']:.1f} ({100 * run['efficiency']:.0f}%)"

for (scheme, gbps), by_p in rows.items():
    print(f"{scheme:<10}{gbps:>8g}" + "".join(f"{cell(by_p[p]):>18}" for p in (64, 256, 1024)))
EOF
