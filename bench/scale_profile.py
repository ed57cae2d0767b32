#!/usr/bin/env python3
"""Writes a compute profile for a faster device by scaling a measured one:
every layer time and the update divided by FACTOR, the GEMM and memory rates
multiplied by it, and "source" saying so. It stands in where no measurement
of that device exists.

Usage: bench/scale_profile.py IN.json OUT.json FACTOR "WHY"
"""
import json
import sys

src, dst, factor, why = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
doc = json.load(open(src))
for layer in doc["layers"]:
    layer["forward_ms"] /= factor
    layer["backward_ms"] /= factor
for key in ("update_ms", "iteration_ms"):
    if key in doc:
        doc[key] /= factor
for key in ("gflops", "memory_gbps"):
    if key in doc:
        doc[key] *= factor
doc["source"] = f"{src.split('/')[-1]} scaled {factor:g}x faster ({why}); not measured"
with open(dst, "w") as out:
    json.dump(doc, out, indent=1)
    out.write("\n")
