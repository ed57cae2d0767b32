"""The command line of the reference scripts that write one file per case.

Each such script holds a CASES table and a run_case(name, generator, workdir)
that writes <workdir>/<name>.safetensors; main() parses --workdir and runs
every case from one generator seeded with `seed`.
"""

import argparse
import os

import torch


def main(description, cases, run_case, seed):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--workdir", required=True, help="where the reference files go")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    for name in cases:
        run_case(name, generator, args.workdir)
    print(f"{len(cases)} cases written to {args.workdir}")
    return 0
