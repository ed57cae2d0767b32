#!/usr/bin/env python3
"""Writes a compute profile for `poseidon simulate` from a model's FLOPs.

A profile is what `poseidon time --json` prints: per layer, forward and
backward milliseconds at a batch size. Where the machine to be modelled is not
at hand, this script spreads a known iteration time over the layers by their
share of the forward FLOPs (`poseidon summary --json`), one third of each
share to forward and two thirds to backward. The profile also records the
rate that implies ("gflops"), at which `poseidon simulate` and `train
--emulate-compute` run the SFB rebuild GEMM.

With --memory-gbps (the device's memory bandwidth, GB/s) the profile also
holds the solver update and the rate of sums of gradients (dist/sim/device_costs.h):
the update streams --update-bytes per parameter through memory (20 for SGD
with momentum: value, gradient and momentum read, value and momentum
written), so update_ms = parameters x update bytes / bandwidth, and it is
part of --iteration-ms (the layers share the rest). Without it update_ms is 0.

The shipped profiles were made with:
  tools/make_profile.py models/vgg19_22k.yaml --iteration-ms 925 --memory-gbps 336 \
      -o profiles/vgg19_22k_b32.json
  tools/make_profile.py models/inception_v3.yaml --memory-gbps 336 \
      --same-rate-as profiles/vgg19_22k_b32.json -o profiles/inception_v3_b32.json
The first is docs/REFERENCE.md's VGG19-22K iteration (0.925 s at batch 32 on one
Titan X, whose GDDR5 moves 336 GB/s); docs/REFERENCE.md gives no Inception-V3 time,
so the second assumes the same GPU at the same effective rate.
"""
import argparse
import json
import os
import subprocess
import sys


def summary_at_batch_1(poseidon, model, sets=()):
    """`poseidon summary --json` of a model (with --set overrides) at batch 1:
    FLOPs grow linearly with the batch, and batch 1 builds the model without
    its batch-32 activations."""
    args = [poseidon, "summary", model, "--batch", "1", "--json"]
    for kv in sets:
        args += ["--set", kv]
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def layer_flops(poseidon, model, batch):
    summary = summary_at_batch_1(poseidon, model)
    layers = [(l["name"], l["type"], l["flops"] * batch) for l in summary["layers"]]
    return summary["model"], summary["total_params"], layers


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="model file (YAML)")
    p.add_argument("--batch", type=int, default=32, help="examples per worker (default 32)")
    rate = p.add_mutually_exclusive_group(required=True)
    rate.add_argument("--iteration-ms", type=float, help="one worker's iteration, forward + backward + update")
    rate.add_argument("--gflops", type=float, help="effective compute rate, GFLOP/s")
    rate.add_argument("--same-rate-as", help="a profile this script wrote: use its rate")
    p.add_argument("--memory-gbps", type=float, help="device memory bandwidth, GB/s: sets update_ms and sum costs")
    p.add_argument("--update-bytes", type=float, default=20,
                   help="bytes the update moves per parameter (default 20: SGD with momentum)")
    p.add_argument("--poseidon", default=os.path.join(root, "build", "poseidon"), help="the poseidon binary")
    p.add_argument("-o", "--output", required=True, help="profile to write (JSON)")
    args = p.parse_args()

    name, params, layers = layer_flops(args.poseidon, args.model, args.batch)
    total = sum(f for _, _, f in layers)
    if total <= 0:
        sys.exit(f"error: {args.model} has no FLOPs to share the iteration by")
    if args.memory_gbps is not None and args.memory_gbps <= 0:
        sys.exit("error: --memory-gbps must be positive")
    update_ms = params * args.update_bytes / (args.memory_gbps * 1e9) * 1e3 if args.memory_gbps else 0.0
    if args.iteration_ms is not None:
        if args.iteration_ms <= update_ms:
            sys.exit(f"error: --iteration-ms {args.iteration_ms:g} leaves nothing beside the update ({update_ms:.3f} ms)")
        gflops = 3 * total / ((args.iteration_ms - update_ms) / 1e3) / 1e9
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
    iteration_ms = sum(e["forward_ms"] + e["backward_ms"] for e in entries) + update_ms
    profile = {"model": name, "batch": args.batch, "source": source, "gflops": gflops}
    if args.memory_gbps:
        profile["memory_gbps"] = args.memory_gbps
        source += f"; update: {args.update_bytes:g} bytes per parameter at {args.memory_gbps:g} GB/s"
        profile["source"] = source
    profile.update({"update_ms": update_ms, "iteration_ms": iteration_ms, "layers": entries})
    with open(args.output, "w") as f:
        json.dump(profile, f, indent=1)
        f.write("\n")
    print(f"{args.output}: {name}, batch {args.batch}, {iteration_ms:.3f} ms per iteration at {gflops:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
