#!/usr/bin/env bash
# Predicted speed-ups of VGG19-22K from `poseidon simulate`, beside the ones
# the reference design reports (docs/REFERENCE.md, "The reported results we compare with": VGG19-22K at
# 40GbE, read from the authors' plotting data), then predictions for larger
# clusters. Compute comes from profiles/vgg19_22k_b32.json (docs/REFERENCE.md's
# 0.925 s per iteration at batch 32, split over the layers by FLOPs).
#
# Usage: bench/simulate_table.sh [POSEIDON_BINARY] [LATENCY_US] [PNG]
# With PNG, also plots both tables there (matplotlib, Debian's
# python3-matplotlib): the paper's and the simulated speed-ups up to 32
# machines, and the predicted efficiency at 64 to 1024.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/poseidon}
latency=${2:-20}
png=${3:-}
model=$root/models/vgg19_22k.yaml
profile=$root/profiles/vgg19_22k_b32.json

paper=$(mktemp)
ours=$(mktemp)
large=$(mktemp)
trap 'rm -f "$paper" "$ours" "$large"' EXIT

# docs/REFERENCE.md, VGG19-22K at 40GbE, speed-up at 1/2/4/8/16/32 machines.
cat >"$paper" <<'EOF'
{"hybrid wfbp": [1, 1.96, 3.83, 7.63, 15.03, 29.45],
 "ps wfbp": [1, 1.78, 3.28, 6.12, 11.56, 21.37],
 "ps no-wfbp": [1, 1.01, 1.47, 2.16, 2.82, 4.42]}
EOF

"$bin" simulate "$model" --profile "$profile" --workers 1,2,4,8,16,32 --bandwidth 40 --latency "$latency" \
  --scheme hybrid,ps --wfbp true,false --json >"$ours"
"$bin" simulate "$model" --profile "$profile" --workers 64,256,1024 --bandwidth 10,40,100 --latency "$latency" \
  --scheme hybrid,allreduce,ps --wfbp true --json >"$large"

# Debian's python3 (with python3-matplotlib) draws the plot.
/usr/bin/python3 - "$paper" "$ours" "$large" "$png" <<'EOF'
import json, sys
paper = json.load(open(sys.argv[1]))
ours = json.load(open(sys.argv[2]))
large = json.load(open(sys.argv[3]))
png = sys.argv[4]

def key(run):
    return f"{run['scheme']} {'wfbp' if run['wfbp'] else 'no-wfbp'}"

print(f"VGG19-22K, 40 Gbit/s, latency {ours['latency_us']:g} us, profile {ours['profile']}")
print("speed-up: paper (docs/REFERENCE.md) / simulated")
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

if png:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for (k, label), color in zip(names.items(), ("C0", "C1", "C2")):
        sim = {r["workers"]: r["speedup"] for r in ours["runs"] if key(r) == k}
        left.plot(workers, paper[k], "o-", color=color, label=f"{label}, paper")
        left.plot(workers, [sim[w] for w in workers], "s--", color=color, label=f"{label}, simulated")
    left.plot(workers, workers, ":", color="gray", label="linear")
    left.set(xscale="log", yscale="log", xlabel="machines", ylabel="speed-up",
             title="VGG19-22K, 40 Gbit/s: reported vs simulated")
    left.set_xticks(workers, [str(w) for w in workers])
    left.legend(fontsize=7)
    styles = {10: ":", 40: "--", 100: "-"}
    colors = {"hybrid": "C0", "allreduce": "C3", "ps": "C1"}
    for (scheme, gbps), by_p in rows.items():
        ps = sorted(by_p)
        right.plot(ps, [100 * by_p[p]["efficiency"] for p in ps], "o" + styles.get(int(gbps), "-"),
                   color=colors.get(scheme, "k"), label=f"{scheme}, {gbps:g} Gbit/s")
    right.set(xscale="log", xlabel="machines", ylabel="scaling efficiency (%)", ylim=(0, 105),
              title="Predictions with WFBP")
    right.set_xticks([64, 256, 1024], ["64", "256", "1024"])
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"plot: {png}")
EOF
