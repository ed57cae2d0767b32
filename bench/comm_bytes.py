"""Bytes each rank moves per iteration under each communication scheme, and
the share of communication hidden behind computation with WFBP on and off,
measured by training under `mpirun -np P` on synthetic data and reading the
`train` records of metrics.jsonl. A record comes every N iterations of 2N (a
record synchronises communication, which would hide none of it behind the
next forward if it came every iteration); the first, which holds the
start-up, is left out. Prints a Markdown table for docs/BENCHMARK_HISTORY.md.

Usage: comm_bytes.py --poseidon BIN [--workers 2 4] [--models ...] [--iters N]
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# name -> (model file, overrides of the model, sample shape, classes, batch per rank)
MODELS = {
    "lenet": ("models/lenet.yaml", [], [1, 28, 28], 10, 64),
    "vgg19_22k 32x32": ("models/vgg19_22k.yaml", ["net.vars.size=32", "net.vars.dropout=0"], [3, 32, 32], 21841, 8),
    "inception_v3 75x75": (
        "models/inception_v3.yaml",
        ["net.vars.size=75", "net.vars.aux=false", "net.vars.num_classes=10", "net.vars.dropout=0"],
        [3, 75, 75],
        10,
        8,
    ),
}
# (scheme, wfbp) rows of each model and worker count
RUNS = [("ps", True), ("ps", False), ("allreduce", True), ("sfb", True), ("hybrid", True), ("hybrid", False)]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--poseidon", type=Path, default=ROOT / "build" / "poseidon")
    p.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--iters", type=int, default=3, help="iterations counted per run (as many run before them)")
    p.add_argument("--bandwidth", type=float, default=10.0,
                   help="Gbit/s the hybrid planner assumes (set, so every run plans alike)")
    return p.parse_args()


def run(args, workdir, name, workers, scheme, wfbp):
    model, overrides, shape, classes, batch = MODELS[name]
    out = Path(workdir) / f"{name.split()[0]}-{workers}-{scheme}-{wfbp}"
    config = out.with_suffix(".yaml")
    config.write_text(json.dumps({
        "model": str(ROOT / model),
        "seed": 1,
        "threads": 1,
        "data": {"train": {"source": "synthetic", "shape": shape, "num_classes": classes,
                           "size": batch * workers * 2 * args.iters, "batch_size": batch}},
        "solver": {"lr": 0.001, "momentum": 0.9, "max_iter": 2 * args.iters},
        "train": {"display": args.iters, "output_dir": str(out), "snapshot_interval": 0},
        "dist": {"scheme": scheme, "wfbp": wfbp, "bandwidth_gbps": args.bandwidth, "latency_us": 50},
    }))
    command = ["mpirun", "--oversubscribe", "-np", str(workers)]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    command += [str(args.poseidon), "train", str(config), "--quiet"]
    for o in overrides:
        command += ["--set", o]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"comm_bytes: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    shutil.rmtree(out)  # the final checkpoint of vgg19_22k is 1.8 GB
    train = [r for r in records if r.get("type") == "train" and "comm_bytes_sent" in r][1:]
    return {
        "sent": statistics.mean(r["comm_bytes_sent"] for r in train),
        "received": statistics.mean(r["comm_bytes_received"] for r in train),
        "comm_ms": 1e3 * statistics.mean(r["comm_s"] for r in train),
        "wait_ms": 1e3 * statistics.mean(r["comm_wait_s"] for r in train),
        # as the engine reports it: waits can outlast the transfers (the compute
        # thread also waits for the start of a transfer), so the share stops at 0
        "hidden": max(0.0, 1 - sum(r["comm_wait_s"] for r in train) / max(1e-12, sum(r["comm_s"] for r in train))),
    }


def main():
    args = parse_args()
    print(f"{datetime.date.today()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
          f"{args.iters} iterations counted per run, hybrid planned for {args.bandwidth:g} Gbit/s")
    print()
    print("| model | P | scheme | WFBP | MB sent per rank/it | MB received per rank/it | comm ms/it | "
          "wait ms/it | hidden |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.models:
            for workers in args.workers:
                for scheme, wfbp in RUNS:
                    r = run(args, workdir, name, workers, scheme, wfbp)
                    print(f"| {name} | {workers} | {scheme} | {'on' if wfbp else 'off'} | {r['sent'] / 1e6:.3f} | "
                          f"{r['received'] / 1e6:.3f} | {r['comm_ms']:.1f} | {r['wait_ms']:.1f} | "
                          f"{100 * r['hidden']:.0f}% |", flush=True)


if __name__ == "__main__":
    main()
