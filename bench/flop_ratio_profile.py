#!/usr/bin/env python3
"""Writes the compute profile of a variant of a model (the same layer names,
other widths, set by --set overrides such as net.vars.width) from the full
model's profile: each layer's forward and backward times multiplied by its
FLOP ratio variant / full (`poseidon summary --json` of both at batch 1),
the update by the parameter ratio (it streams bytes per parameter), the
device's rates kept, and "source" saying it is derived, not measured.

Usage: bench/flop_ratio_profile.py PROFILE.json CONFIG.yaml OUT.json
         [--poseidon build/poseidon] --set KEY=VALUE [--set KEY=VALUE]...
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
from make_profile import summary_at_batch_1  # noqa: E402


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("profile", help="the full model's profile (JSON)")
    p.add_argument("config", help="the model or training config both are built from (YAML)")
    p.add_argument("output", help="the variant's profile to write (JSON)")
    p.add_argument("--set", dest="sets", action="append", required=True, help="an override that makes the variant")
    p.add_argument("--poseidon", default=os.path.join(root, "build", "poseidon"), help="the poseidon binary")
    args = p.parse_args()

    full = summary_at_batch_1(args.poseidon, args.config)
    variant = summary_at_batch_1(args.poseidon, args.config, args.sets)
    full_flops = {l["name"]: l["flops"] for l in full["layers"]}
    variant_flops = {l["name"]: l["flops"] for l in variant["layers"]}
    with open(args.profile) as f:
        doc = json.load(f)
    for layer in doc["layers"]:
        name = layer["name"]
        if name not in full_flops or name not in variant_flops:
            sys.exit(f"error: {args.profile}: layer '{name}' is not in both models of {args.config}")
        if full_flops[name] == 0:
            if variant_flops[name] != 0:
                sys.exit(f"error: layer '{name}' has no FLOPs in the full model but {variant_flops[name]} in the variant")
            continue
        ratio = variant_flops[name] / full_flops[name]
        layer["forward_ms"] *= ratio
        layer["backward_ms"] *= ratio
    params_ratio = variant["total_params"] / full["total_params"]
    doc["update_ms"] = doc.get("update_ms", 0.0) * params_ratio
    doc["iteration_ms"] = sum(l["forward_ms"] + l["backward_ms"] for l in doc["layers"]) + doc["update_ms"]
    doc["source"] = (f"derived from {os.path.basename(args.profile)} by each layer's FLOP ratio "
                     f"(poseidon summary) with {' '.join(args.sets)}, the update by the parameter ratio "
                     f"({variant['total_params']:,} / {full['total_params']:,}); not measured")
    with open(args.output, "w") as out:
        json.dump(doc, out, indent=1)
        out.write("\n")
    print(f"{args.output}: {doc['iteration_ms']:.3f} ms per iteration, {variant['total_params']:,} parameters")


if __name__ == "__main__":
    main()
