"""The conv layer's CPU engines side by side on the 3x3 convolutions of the
benchmark models: oneDNN's direct kernels (engine: onednn) against Winograd
F(4x4, 3x3) (engine: winograd), forward plus backward (input and weight
gradients) of one layer, alternating the two round after round so that a
noisy machine slows both alike. Each shape is a small model: a 1x1
convolution (so that the measured layer computes its input gradient), the
3x3 convolution, global max pooling, an fc layer and the loss; only the 3x3
layer's row of `poseidon time --json` is read. Prints a Markdown table with
each engine's fastest round, their ratio and the median (range) of the
per-round ratios, and which engine the layer picks by default (engine:
auto) on this CPU."""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# label, in channels, out channels, height, width, batch: the 3x3 stride-1
# convolutions of models/vgg_small.yaml, models/resnet_small.yaml and VGG19
# at 32x32 (compare_torch's vgg19_22k_32).
SHAPES = [
    ("resnet_small layer1", 32, 32, 32, 32, 64),
    ("vgg_small conv1_2", 64, 64, 32, 32, 64),
    ("vgg_small conv2_1", 64, 128, 16, 16, 64),
    ("resnet_small layer2", 64, 64, 16, 16, 64),
    ("vgg_small conv2_2", 128, 128, 16, 16, 64),
    ("vgg_small conv3_1", 128, 256, 8, 8, 64),
    ("resnet_small layer3", 128, 128, 8, 8, 64),
    ("vgg_small conv3_2", 256, 256, 8, 8, 64),
    ("vgg19_22k_32 features.21", 512, 512, 4, 4, 32),
]
ENGINES = ["onednn", "winograd"]


def model_yaml(c: int, k: int, h: int, w: int, engine: str) -> str:
    return f"""name: conv_{c}_{k}_{h}x{w}_{engine}
inputs:
  data: [{c}, {h}, {w}]
  label: []
layers:
  - {{name: pre, type: conv, inputs: data, num_output: {c}, kernel_size: 1}}
  - {{name: conv, type: conv, num_output: {k}, kernel_size: 3, pad: 1, engine: {engine}}}
  - {{name: pool, type: pool, mode: max, kernel_size: [{h}, {w}], stride: [{h}, {w}]}}
  - {{name: fc, type: fc, num_output: 10}}
  - {{name: loss, type: softmax_loss, inputs: [fc, label]}}
"""


def layer_ms(binary: Path, model: Path, batch: int, iters: int, threads: int) -> float:
    cmd = [str(binary), "time", str(model), "--batch", str(batch), "--iters", str(iters), "--warmup", "1",
           "--threads", str(threads), "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"conv_engines: {' '.join(cmd)} failed: {done.stderr.strip()}")
    layer = next(l for l in json.loads(done.stdout)["layers"] if l["name"] == "conv")
    return layer["forward_ms"] + layer["backward_ms"]


def engine_of(binary: Path, model: Path, batch: int) -> str:
    """The engine the 3x3 layer runs, from `poseidon time --json`."""
    done = subprocess.run([str(binary), "time", str(model), "--batch", str(batch), "--iters", "1", "--warmup", "0",
                           "--json"], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"conv_engines: poseidon time {model} failed: {done.stderr.strip()}")
    return next(l for l in json.loads(done.stdout)["layers"] if l["name"] == "conv").get("engine", "?")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--poseidon", type=Path, default=ROOT / "build" / "poseidon")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=3, help="timed iterations per run (after one warm-up)")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()

    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp)
        for label, c, k, h, w, batch in SHAPES:
            models = {}
            for engine in ENGINES:
                models[engine] = model_dir / f"{engine}_{c}_{k}_{h}x{w}.yaml"
                models[engine].write_text(model_yaml(c, k, h, w, engine))
            times = {engine: [] for engine in ENGINES}
            for r in range(args.rounds):
                for engine in ENGINES:
                    times[engine].append(layer_ms(args.poseidon, models[engine], batch, args.iters, args.threads))
                print(f"round {r + 1}/{args.rounds} {label}: " +
                      ", ".join(f"{e} {times[e][-1]:.1f} ms" for e in ENGINES), file=sys.stderr, flush=True)
            ratios = [a / b for a, b in zip(times["onednn"], times["winograd"])]
            auto = model_dir / f"auto_{c}_{k}_{h}x{w}.yaml"
            auto.write_text(model_yaml(c, k, h, w, "auto"))
            rows.append((label, c, k, h, w, batch, min(times["onednn"]), min(times["winograd"]), ratios,
                         engine_of(args.poseidon, auto, batch)))

    print(f"date {datetime.date.today()}, {os.cpu_count()} CPUs, {args.threads} threads, fastest of {args.rounds} "
          f"rounds, each the mean of {args.iters} iterations; forward + backward of the 3x3 layer, ms")
    print()
    print("| convolution | in -> out, image, batch | onednn ms | winograd ms | onednn / winograd "
          "| per-round ratio: median (range) | auto runs |")
    print("|---|---|---:|---:|---:|---:|---|")
    for label, c, k, h, w, batch, direct, winograd, ratios, auto in rows:
        print(f"| {label} | {c} -> {k}, {h}x{w}, {batch} | {direct:.1f} | {winograd:.1f} | {direct / winograd:.2f} "
              f"| {statistics.median(ratios):.2f} ({min(ratios):.2f} to {max(ratios):.2f}) | {auto} |")
    print()
    print(f"1-minute load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
