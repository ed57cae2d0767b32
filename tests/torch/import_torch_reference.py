"""PyTorch's eval-mode output of a model of import_models.py, for import_torch_test.cpp.

Usage: import_torch_reference.py --model NAME --size S --batch N --workdir DIR

Writes input.safetensors ("data": a random float32 [N, 3, S, S] batch) and
reference.safetensors ("output": the model's output computed in float64 from
its float32 weights).
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import import_models  # noqa: E402
import safetensors_io  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()

    model = getattr(import_models, args.model)().double()
    torch.manual_seed(import_models.SEED + 1)
    x = torch.randn(args.batch, 3, args.size, args.size)
    with torch.no_grad():
        y = model(x.double())
    safetensors_io.write(os.path.join(args.workdir, "input.safetensors"), {"data": x})
    safetensors_io.write(os.path.join(args.workdir, "reference.safetensors"), {"output": y})
    print(f"{args.model}: input {list(x.shape)}, output {list(y.shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
