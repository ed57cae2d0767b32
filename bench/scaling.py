#!/usr/bin/env python3
"""Speed-up table and plot of bench/scaling.sh's runs.

Reads results.jsonl (one line per run: model, workers, scheme, measured
iteration_s on the emulated cluster, simulated_iteration_s from `poseidon
simulate` with the same settings) and writes, per model, a Markdown table of
speed-ups (P x t1 / tP, t1 the one-rank run) with the simulator's prediction
next to each and their relative difference, plus a PNG with one line per
scheme (solid: emulated cluster, dashed: simulator). A second table gives
the machine's CPU during each run's timed iterations: every emulated host's
TCP stack and MPI progress run on this machine's cores, a cost the
simulator's separate hosts do not have, so a row whose machine was
saturated measures the machine more than the scheme.
"""
import argparse
import json
from collections import defaultdict

LABELS = {"ps-nowfbp": "PS, no overlap", "ps": "WFBP + PS", "hybrid": "WFBP + HybComm", "allreduce": "WFBP + all-reduce",
          "sfb": "WFBP + SFB for FC, PS"}


def load(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    by_model = defaultdict(list)
    for r in rows:
        by_model[r["model"]].append(r)
    return by_model


def speedups(rows):
    """{scheme: {P: (measured speed-up, simulated speed-up, row)}} and t1 of the model."""
    single = [r for r in rows if r["workers"] == 1 and "iteration_s" in r]
    if not single:
        return {}, None
    t1 = single[0]["iteration_s"]
    table = defaultdict(dict)
    for r in rows:
        if r["workers"] == 1 or "iteration_s" not in r:
            continue
        p = r["workers"]
        measured = p * t1 / r["iteration_s"]
        # The simulator's own one-worker time is the profile's; its speed-up is against that.
        simulated = None
        if "simulated_iteration_s" in r and r.get("simulated_single_s"):
            simulated = p * r["simulated_single_s"] / r["simulated_iteration_s"]
        table[r["scheme"]][p] = (measured, simulated, r)
    return table, t1


def markdown(by_model):
    out = []
    for model, rows in by_model.items():
        table, t1 = speedups(rows)
        if t1 is None:
            out.append(f"### {model}: no one-rank run\n")
            continue
        first = rows[0]
        out.append(f"### {model}: scale {first['scale']:g} (links {first['bandwidth_gbps']:g} Gbit/s), t1 = {t1:.3f} s\n")
        sim_t1 = next((r["simulated_single_s"] for r in rows if r.get("simulated_single_s")), None)
        if sim_t1:
            payload = first.get("simulated_bandwidth_gbps")
            links = f"; simulated links at the {payload:g} Gbit/s they carry as TCP payload" if payload else ""
            out.append(f"simulated t1 = {sim_t1:.3f} s (the profile's layers and update{links})\n")
        out.append("Cells: emulated iteration (s), speed-up emulated / simulated, relative difference of the speed-up "
                   "(simulated - emulated) / emulated; in brackets that of the iteration time\n")
        workers = sorted({p for by_p in table.values() for p in by_p})
        out.append("| scheme | " + " | ".join(f"P={p}" for p in workers) + " |")
        out.append("|---|" + "---|" * len(workers))
        for scheme in LABELS:
            if scheme not in table:
                continue
            cells = []
            for p in workers:
                if p not in table[scheme]:
                    cells.append("-")
                    continue
                measured, simulated, r = table[scheme][p]
                if simulated is None:
                    cells.append(f"{r['iteration_s']:.2f} s, {measured:.2f}x / -")
                    continue
                time_diff = (r["simulated_iteration_s"] - r["iteration_s"]) / r["iteration_s"]
                speedup_diff = (simulated - measured) / measured
                cells.append(f"{r['iteration_s']:.2f} s, {measured:.2f}x / {simulated:.2f}x, "
                             f"{100 * speedup_diff:+.1f}% ({100 * time_diff:+.1f}%)")
            out.append(f"| {LABELS[scheme]} | " + " | ".join(cells) + " |")
        out.extend(cpu_table(table, workers))
        failed = [r for r in rows if r.get("status") or "error" in r]
        for r in failed:
            out.append(f"\nfailed: P={r['workers']} {r['scheme']}: status {r.get('status')} {r.get('error', '')}")
        out.append("")
    return "\n".join(out)


def cpu_table(table, workers):
    """The machine's CPU during each run's timed iterations: the emulated hosts
    share its cores, which the simulator's hosts do not."""
    if not any("machine_cpu_busy" in r for by_p in table.values() for _, _, r in by_p.values()):
        return []
    out = ["\nThe machine's CPU during the timed iterations: mean busy, share of the time at least 90% busy\n",
           "| scheme | " + " | ".join(f"P={p}" for p in workers) + " |", "|---|" + "---|" * len(workers)]
    for scheme in LABELS:
        if scheme not in table:
            continue
        cells = []
        for p in workers:
            r = table[scheme].get(p, (None, None, {}))[2]
            cells.append(f"{100 * r['machine_cpu_busy']:.0f}%, {100 * r['machine_cpu_saturated']:.0f}%"
                         if "machine_cpu_busy" in r else "-")
        out.append(f"| {LABELS[scheme]} | " + " | ".join(cells) + " |")
    return out


def plot(by_model, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(by_model), figsize=(6 * len(by_model), 4.5), squeeze=False)
    for ax, (model, rows) in zip(axes[0], by_model.items()):
        table, t1 = speedups(rows)
        top = 1
        for i, scheme in enumerate(s for s in LABELS if s in table):
            ps = sorted(table[scheme])
            color = f"C{i}"
            ax.plot([1] + ps, [1] + [table[scheme][p][0] for p in ps], "o-", color=color, label=LABELS[scheme])
            sim = [(p, table[scheme][p][1]) for p in ps if table[scheme][p][1] is not None]
            if sim:
                ax.plot([1] + [p for p, _ in sim], [1] + [s for _, s in sim], "x--", color=color, alpha=0.7)
            top = max([top] + ps)
        ax.plot([1, top], [1, top], ":", color="grey", label="linear")
        ax.set_title(f"{model} (solid: emulated cluster, dashed: simulate)")
        ax.set_xlabel("hosts P")
        ax.set_ylabel("speed-up")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--table")
    ap.add_argument("--plot")
    args = ap.parse_args()
    by_model = load(args.results)
    text = markdown(by_model)
    if args.table:
        open(args.table, "w").write(text + "\n")
    else:
        print(text)
    if args.plot:
        try:
            plot(by_model, args.plot)
        except ImportError:
            print("scaling.py: matplotlib missing (apt-get install python3-matplotlib): no plot")


if __name__ == "__main__":
    main()
