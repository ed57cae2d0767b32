#!/usr/bin/env python3
"""Writes a compute profile for `poseidon simulate` from a model's FLOPs.

A profile is what `poseidon time --json` prints: per layer, forward and
backward milliseconds at a batch size. Where the machine to be modelled is not
at hand, this script spreads a known iteration time over the layers by their
share of the forward FLOPs (`poseidon summary --json`), one third of each
share to forward and two thirds to backward, the update counted in the
iteration. The profile also records the rate that implies ("gflops"), which
`poseidon simulate` uses for the SFB rebuild GEMM.

The shipped profiles were made with:
  tools/make_profile.py models/vgg19_22k.yaml --iteration-ms 925 \
      -o profiles/vgg19_22k_b32.json
  tools/make_profile.py models/inception_v3.yaml \
      --same-rate-as profiles/vgg19_22k_b32.json -o profiles/inception_v3_b32.json
The first is PAPER.md's VGG19-22K iteration (0.925 s at batch 32 on one GPU);
PAPER.md gives no Inception-V3 time, so the second assumes the same GPU at the
same effective rate.
"""
import argparse
import json
import os
import subprocess
import sys


def layer_flops(poseidon, model, batch):
    # FLOPs grow linearly with the batch: ask at batch 1, which builds the
    # model without its batch-32 activations.
    out = subprocess.run([poseidon, "summary", model, "--batch", "1", "--json"],
                         check=True, capture_output=True, text=True).stdout
    summary = json.loads(out)
    return summary["model"], [(l["name"], l["type"], l["flops"] * batch) for l in summary["layers"]]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="model file (YAML)")
    p.add_argument("--batch", type=int, default=32, help="examples per worker (default 32)")
    rate = p.add_mutually_exclusive_group(required=True)
    rate.add_argument("--iteration-ms", type=float, help="one worker's iteration, forward + backward + update")
    rate.add_argument("--gflops", type=float, help="effective compute rate, GFLOP/s")
    rate.add_argument("--same-rate-as", help="a profile this script wrote: use its rate")
    p.add_argument("--poseidon", default=os.path.join(root, "build", "poseidon"), help="the poseidon binary")
    p.add_argument("-o", "--output", required=True, help="profile to write (JSON)")
    args = p.parse_args()

    name, layers = layer_flops(args.poseidon, args.model, args.batch)
    total = sum(f for _, _, f in layers)
    if total <= 0:
        sys.exit(f"error: {args.model} has no FLOPs to share the iteration by")
    if args.iteration_ms is not None:
        gflops = 3 * total / (args.iteration_ms / 1e3) / 1e9
        source = f"{args.iteration_ms:g} ms per iteration split by forward FLOPs (1/3 forward, 2/3 backward)"
    elif args.gflops is not None:
        gflops = args.gflops
        source = f"forward FLOPs at {gflops:g} GFLOP/s, backward twice forward"
    else:
        with open(args.same_rate_as) as f:
            gflops = json.load(f)["gflops"]
        source = f"forward FLOPs at the rate of {os.path.basename(args.same_rate_as)} ({gflops:.1f} GFLOP/s)"

    entries = []
    for layer, kind, flops in layers:
        forward_ms = flops / (gflops * 1e9) * 1e3
        entries.append({"name": layer, "type": kind, "forward_ms": forward_ms, "backward_ms": 2 * forward_ms})
    iteration_ms = sum(e["forward_ms"] + e["backward_ms"] for e in entries)
    profile = {"model": name, "batch": args.batch, "source": source, "gflops": gflops,
               "update_ms": 0, "iteration_ms": iteration_ms, "layers": entries}
    with open(args.output, "w") as f:
        json.dump(profile, f, indent=1)
        f.write("\n")
    print(f"{args.output}: {name}, batch {args.batch}, {iteration_ms:.3f} ms per iteration at {gflops:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
