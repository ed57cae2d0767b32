#!/usr/bin/env bash
# Simulated efficiency at 64 to 1024 ranks with the collectives for large
# clusters (dist: allreduce auto, fusion auto, spread_blocks true), WFBP, for
# Inception-V3 and VGG19-22K on the shipped profiles and on the same profiles
# scaled to a current GPU (profiles/modern/, bench/scale_profile.py), at 25,
# 40, 100 and 400 Gbit/s; markdown tables on stdout, with PNG a plot beside
# Horovod's and BytePS's published figures.
#
# Usage: bench/scaling_table.sh [POSEIDON_BINARY] [PNG] [LATENCY_US]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build/poseidon}
png=${2:-}
latency=${3:-20}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
scale=(--set dist.allreduce=auto --set dist.fusion=auto --set dist.spread_blocks=true)
for set in shipped modern; do
  dir=$root/profiles
  [[ $set == modern ]] && dir=$root/profiles/modern
  for m in inception_v3 vgg19_22k; do
    "$bin" simulate "$root/configs/${m}_synthetic.yaml" --profile "$dir/${m}_b32.json" --workers 64,256,512,1024 \
      --bandwidth 25,40,100,400 --latency "$latency" --scheme hybrid,allreduce "${scale[@]}" --json \
      >"$out/${set}_${m}.json"
  done
done

/usr/bin/python3 - "$out" "$png" <<'PY'
import json, sys
out, png = sys.argv[1], sys.argv[2]
workers = [64, 256, 512, 1024]
names = {"inception_v3": "Inception-V3", "vgg19_22k": "VGG19-22K"}
data = {}
for s in ("shipped", "modern"):
    for m in names:
        j = json.load(open(f"{out}/{s}_{m}.json"))
        data[(s, m)] = j
        print(f"\n{names[m]}, {s} profile ({j['profile']}), one worker {j['single_iteration_ms']:.1f} ms,"
              f" latency {j['latency_us']:g} us: efficiency (speed-up / P)\n")
        print("| scheme | Gbit/s | " + " | ".join(f"P={p}" for p in workers) + " |")
        print("|---|---:|" + "---:|" * len(workers))
        rows = {}
        for r in j["runs"]:
            rows.setdefault((r["scheme"], r["bandwidth_gbps"]), {})[r["workers"]] = r
        for (scheme, gbps), by_p in rows.items():
            print(f"| {scheme} | {gbps:g} | " + " | ".join(f"{100 * by_p[p]['efficiency']:.1f}%" for p in workers) + " |")
if png:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 5), sharey=True)
    for ax, m in zip(axes, names):
        for s, style in (("shipped", "-"), ("modern", "--")):
            for gbps, color in zip((25, 40, 100, 400), ("C0", "C1", "C2", "C3")):
                eff = {r["workers"]: r["efficiency"] for r in data[(s, m)]["runs"]
                       if r["scheme"] == "hybrid" and r["bandwidth_gbps"] == gbps}
                ax.plot(workers, [100 * eff[p] for p in workers], "o" + style, color=color,
                        label=f"{gbps} Gbit/s, {s} profile")
        # Published: Horovod (docs/benchmarks.md: 512 GPUs, 25 Gbit/s RoCE).
        if m == "inception_v3":
            ax.plot([512], [90], "k*", markersize=12, label="Horovod, 512 GPUs, 25 Gbit/s")
        else:
            ax.plot([512], [68], "k*", markersize=12, label="Horovod VGG-16, 512 GPUs, 25 Gbit/s")
        ax.set(xscale="log", xlabel="ranks", title=f"{names[m]}, hybrid (simulated)")
        ax.set_xticks(workers, [str(p) for p in workers])
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("scaling efficiency, %")
    axes[0].set_ylim(0, 110)
    handles, labels = axes[1].get_legend_handles_labels()
    h0, l0 = axes[0].get_legend_handles_labels()
    fig.legend(handles + h0[-1:], labels + l0[-1:], fontsize=7, loc="lower center", ncol=5)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    fig.savefig(png, dpi=110)
PY
