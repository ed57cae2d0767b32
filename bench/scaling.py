#!/usr/bin/env python3
"""Everything bench/scaling.sh computes in Python, one subcommand each.

  table RESULTS [--table MD] [--plot PNG]
      Per model, a Markdown table of speed-ups (P x t1 / tP, t1 the one-rank
      run) measured on the emulated cluster with the simulator's prediction
      next to each and their relative difference, plus a PNG with one line
      per scheme (solid: emulated cluster, dashed: simulator). A second table
      gives the machine's CPU during each run's timed iterations: every
      emulated host's TCP stack and MPI progress run on this machine's cores,
      a cost the simulator's separate hosts do not have, so a row whose
      machine was saturated measures the machine more than the scheme.
  strip-aux PROFILE OUT
      Inception-V3's profile without the auxiliary head (runs leave it out).
  scale-profile PROFILE OUT SCALE
      The profile slowed SCALE times, as the emulated compute waits.
  row METRICS SIM_JSON --model M --workers P --scheme S --scale F --bandwidth-gbps G
      --payload-gbps G --status N --wall-s T --iters M --cpu-log FILE
      One line of results.jsonl for a run, from its metrics.jsonl, the
      simulator's JSON and the machine's CPU samples.
  resimulate-runs RESULTS MODEL
      "workers scheme" of each multi-host run of MODEL that has a timing.
  resimulate RESULTS MODEL SIM_DIR PAYLOAD_GBPS
      Replaces the simulator's columns of MODEL's rows in RESULTS with
      SIM_DIR/sim-<workers>-<scheme>.json.
"""
import argparse
import json
import os
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


def strip_aux(args):
    p = json.load(open(args.profile))
    p["layers"] = [l for l in p["layers"] if not l["name"].startswith(("AuxLogits", "aux_loss"))]
    p["source"] = args.profile + " without the auxiliary head"
    json.dump(p, open(args.out, "w"), indent=1)


def scale_profile(args):
    """The simulator reads the profile as is: the same times, slowed F times
    (the SFB rebuild at the profile's GEMM rate over F, as the emulation waits)."""
    p = json.load(open(args.profile))
    for l in p["layers"]:
        l["forward_ms"] *= args.scale
        l["backward_ms"] *= args.scale
    p["update_ms"] = p.get("update_ms", 0) * args.scale
    for rate in ("gflops", "memory_gbps"):
        if rate in p:
            p[rate] /= args.scale
    json.dump(p, open(args.out, "w"), indent=1)


def machine_cpu(path, begin, end):
    """Mean busy share of the machine's CPU between two wall-clock times, and
    the share of that time it was at least 90% busy (half-second samples)."""
    samples = []
    for line in open(path):
        f = line.split()
        ticks = [int(x) for x in f[2:]]
        samples.append((float(f[0]), sum(ticks), ticks[3] + ticks[4]))  # idle + iowait
    busy = [(a[0], 1 - (b[2] - a[2]) / (b[1] - a[1])) for a, b in zip(samples, samples[1:])
            if begin <= a[0] and b[0] <= end and b[1] > a[1]]
    if not busy:
        return None, None
    return sum(x for _, x in busy) / len(busy), sum(x >= 0.9 for _, x in busy) / len(busy)


def add_simulated(row, sim):
    """The simulator's columns of a results row, from `poseidon simulate --json`."""
    runs = sim.get("runs", [])
    if runs:
        row["simulated_single_s"] = sim["single_iteration_ms"] / 1e3
        row["simulated_iteration_s"] = runs[0]["iteration_ms"] / 1e3
        row["simulated_schemes"] = runs[0]["layer_schemes"]


def row(args):
    """The run's iteration time over the last `iters` of 2 x iters iterations,
    from its train records; a hybrid plan's GEMM rate from its plan record."""
    iters = args.iters
    r = {"model": args.model, "workers": args.workers, "scheme": args.scheme, "scale": args.scale,
         "bandwidth_gbps": args.bandwidth_gbps, "simulated_bandwidth_gbps": args.payload_gbps,
         "status": args.status, "wall_s": args.wall_s, "gemm_gflops": 0.0, "timed_iterations": iters}
    try:
        records = [json.loads(l) for l in open(args.metrics) if l.strip()]
        at = {t["iter"]: t for t in records if t["type"] == "train"}
        r["gemm_gflops"] = next((p["gemm_gflops"] for p in records if p["type"] == "plan"), 0.0)
        r["iteration_s"] = (at[2 * iters]["elapsed_s"] - at[iters]["elapsed_s"]) / iters
        r["comm_wait_s"] = at[2 * iters].get("comm_wait_s")
        r["comm_s"] = at[2 * iters].get("comm_s")
        if "unix_time" in at[iters]:
            mean, saturated = machine_cpu(args.cpu_log, at[iters]["unix_time"], at[2 * iters]["unix_time"])
            if mean is not None:
                r["machine_cpu_busy"] = mean
                r["machine_cpu_saturated"] = saturated
    except (OSError, KeyError) as e:
        r["error"] = f"no timing ({e})"
    add_simulated(r, json.load(open(args.sim)))
    print(json.dumps(r))


def resimulate_runs(args):
    for r in map(json.loads, filter(str.strip, open(args.results))):
        if r["model"] == args.model and r["workers"] > 1 and "iteration_s" in r:
            print(r["workers"], r["scheme"])


def resimulate(args):
    rows = [json.loads(line) for line in open(args.results) if line.strip()]
    for r in rows:
        sim = os.path.join(args.sim_dir, f"sim-{r['workers']}-{r['scheme']}.json")
        if r["model"] != args.model or not os.path.exists(sim):
            continue
        r["simulated_bandwidth_gbps"] = args.payload_gbps
        add_simulated(r, json.load(open(sim)))
    with open(args.results, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def table(args):
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)

    def command(name, run, *positional):
        """A subcommand with positional arguments given as names or (name, type)."""
        c = sub.add_parser(name)
        for arg in positional:
            arg_name, kind = arg if isinstance(arg, tuple) else (arg, str)
            c.add_argument(arg_name, type=kind)
        c.set_defaults(run=run)
        return c

    t = command("table", table, "results")
    t.add_argument("--table")
    t.add_argument("--plot")
    command("strip-aux", strip_aux, "profile", "out")
    command("scale-profile", scale_profile, "profile", "out", ("scale", float))
    r = command("row", row, "metrics", "sim")
    for name, kind in (("model", str), ("workers", int), ("scheme", str), ("scale", float),
                       ("bandwidth-gbps", float), ("payload-gbps", float), ("status", int), ("wall-s", int),
                       ("iters", int), ("cpu-log", str)):
        r.add_argument("--" + name, type=kind, required=True)
    command("resimulate-runs", resimulate_runs, "results", "model")
    command("resimulate", resimulate, "results", "model", "sim_dir", ("payload_gbps", float))
    args = ap.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
