#!/usr/bin/env python3
# Curves of training runs from the metrics.jsonl that `poseidon train` writes:
# loss, test metrics, learning rate and img/s against the iteration, one
# colour per run, in one PNG. `poseidon plot` runs this script (built into
# the binary); it needs Debian's python3-matplotlib.
#   tools/plot_metrics.py RUN [RUN ...] [-o curves.png] [--labels a,b]
# RUN is a metrics.jsonl or the output_dir that holds one.
import argparse
import json
import os
import sys


def fail(message):
    print("error: " + message, file=sys.stderr)
    sys.exit(2)


def metrics_path(run):
    return os.path.join(run, "metrics.jsonl") if os.path.isdir(run) else run


def read_run(path):
    """Train and test records by iteration; a resumed run's later record of an iteration wins."""
    train, test = {}, {}
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            fail(f"{path}:{number}: not a JSON record")
        kind = record.get("type")
        if kind == "train":
            train[record["iter"]] = record
        elif kind == "test":
            test[record["iter"]] = record
    if not train and not test:
        fail(f"{path}: no train or test records")
    return [train[i] for i in sorted(train)], [test[i] for i in sorted(test)]


def main():
    parser = argparse.ArgumentParser(prog="poseidon plot", description=__doc__)
    parser.add_argument("runs", nargs="+", help="metrics.jsonl files or the output_dir holding one")
    parser.add_argument("-o", "--output", help="PNG to write (default: RUN/curves.png for one run, else curves.png)")
    parser.add_argument("--labels", help="comma-separated legend labels, one per run (default: the run folders)")
    args = parser.parse_args()

    paths = [metrics_path(r) for r in args.runs]
    labels = args.labels.split(",") if args.labels else [os.path.basename(os.path.dirname(os.path.abspath(p))) for p in paths]
    if len(labels) != len(paths):
        fail(f"--labels names {len(labels)} runs, but {len(paths)} were given")
    output = args.output or (os.path.join(os.path.dirname(paths[0]) or ".", "curves.png") if len(paths) == 1 else "curves.png")
    runs = [read_run(p) for p in paths]

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("poseidon plot needs matplotlib: apt-get install python3-matplotlib (Debian)")

    figure, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True)
    loss, metric, lr, rate = axes[0][0], axes[0][1], axes[1][0], axes[1][1]
    metric_names = set()
    for index, ((train, test), label) in enumerate(zip(runs, labels)):
        colour = f"C{index % 10}"
        iters = [r["iter"] for r in train]
        if train:
            loss.plot(iters, [r["loss"] for r in train], color=colour, alpha=0.25, linewidth=0.8)
            loss.plot(iters, [r["loss_avg"] for r in train], color=colour, label=f"{label} train (smoothed)")
            lr.plot(iters, [r["lr"] for r in train], color=colour, label=label)
            rate.plot(iters, [r["images_per_sec"] for r in train], color=colour, label=label)
        if test:
            test_iters = [r["iter"] for r in test]
            loss.plot(test_iters, [r["loss"] for r in test], color=colour, linestyle="--", marker="o",
                      markersize=3, label=f"{label} test")
            names = sorted(k for k in test[0] if k not in ("type", "iter", "loss", "examples"))
            for style, name in zip(["-", "--", ":", "-."] * 4, names):
                metric_names.add(name)
                metric.plot(test_iters, [r.get(name) for r in test], color=colour, linestyle=style, marker="o",
                            markersize=3, label=f"{label} {name}")
        print(f"{paths[index]}: {len(train)} train records, {len(test)} test records")

    loss.set_title("loss")
    metric.set_title("test " + ", ".join(sorted(metric_names)) if metric_names else "test metrics (none recorded)")
    lr.set_title("learning rate")
    rate.set_title("images per second (each display interval)")
    for ax in (loss, metric, lr, rate):
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    loss.set_ylabel("loss")
    metric.set_ylabel(", ".join(sorted(metric_names)) if metric_names else "value")
    lr.set_ylabel("learning rate")
    rate.set_ylabel("images / s")
    for ax in (lr, rate):
        ax.set_xlabel("iteration")
    figure.tight_layout()
    # The PNG says in words what each panel plots against what.
    description = "; ".join(f"{ax.get_title()}: y {ax.get_ylabel()}, x iteration" for ax in (loss, metric, lr, rate))
    try:
        figure.savefig(output, dpi=100, metadata={"Description": description})
    except OSError as e:
        fail(f"{output}: {e.strerror}")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
