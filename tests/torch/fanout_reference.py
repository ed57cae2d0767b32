"""PyTorch's gradients of small nets in which one blob fans out: conv c1's
output feeds a ReLU, a max pooling or a dropout, and also a second
convolution c2; the two branches are summed, then fc and the mean
cross-entropy. The gradient reaching c1's output is the sum of both
branches' input gradients, so a layer that overwrote its input gradient
instead of adding to it would lose the other branch's share.

Usage: fanout_reference.py --workdir DIR --dropout-seed S

For each case: input, labels and parameters drawn under a fixed seed in
float32, then PyTorch forward and backward in float64 (and, for the bf16
cases, also in float32 under torch.autocast("cpu", dtype=torch.bfloat16)).
Dropout drops exactly the elements poseidon's layer drops for a forward whose
draw from the run's RNG is S (layers/dropout_mask.h: SplitMix64 over the
element's counter). Writes DIR/<case>.safetensors:
  input.data, input.label, param.<layer>.<weight|bias>   what the net is given
  ref.loss, ref.grad.<param>, ref.grad.c1                 float64 PyTorch
  autocast.loss, autocast.grad.<...>                      bf16 cases only
and metadata "model" (the poseidon model file), "precision".
"""

import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

SEED = 3
BATCH, CHANNELS, SIZE, WIDTH, CLASSES = 4, 3, 6, 4, 5
DROPOUT_RATIO = 0.5
MASK64 = (1 << 64) - 1

# branch -> (the branch layer's poseidon config, c2's extra keys, the branch in PyTorch of (c1, mask))
BRANCHES = {
    "relu": ("{name: b, type: relu, inputs: c1}", "kernel_size: 1", lambda c1, mask: F.relu(c1)),
    "pool": ("{name: b, type: pool, inputs: c1, kernel_size: 2}", "kernel_size: 2, stride: 2",
             lambda c1, mask: F.max_pool2d(c1, 2)),
    "dropout": (f"{{name: b, type: dropout, inputs: c1, ratio: {DROPOUT_RATIO}}}", "kernel_size: 1",
                lambda c1, mask: c1 * mask.to(c1.dtype)),
}


def model_file(branch):
    layer, c2_keys = BRANCHES[branch][:2]
    # The branch comes before c2, so that backward reaches c1's output
    # gradient through c2 first and through the branch layer second.
    return f"""name: fanout_{branch}
inputs: {{data: [{CHANNELS}, {SIZE}, {SIZE}], label: []}}
layers:
  - {{name: c1, type: conv, inputs: data, num_output: {WIDTH}, kernel_size: 3, pad: 1}}
  - {layer}
  - {{name: c2, type: conv, inputs: c1, num_output: {WIDTH}, {c2_keys}}}
  - {{name: s, type: sum, inputs: [b, c2]}}
  - {{name: fc, type: fc, inputs: s, num_output: {CLASSES}}}
  - {{name: loss, type: softmax_loss, inputs: [fc, label]}}
"""


def splitmix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def dropout_mask(seed, shape):
    """poseidon's mask for a forward whose draw is `seed`: 0 or 1 / (1 - ratio)."""
    threshold = math.ceil(DROPOUT_RATIO * 2.0**53)
    scale = 1.0 / (1.0 - DROPOUT_RATIO)
    n = math.prod(shape)
    keep = [(splitmix64((seed + (i + 1) * 0x9E3779B97F4A7C15) & MASK64) >> 11) >= threshold for i in range(n)]
    return torch.tensor([scale if k else 0.0 for k in keep], dtype=torch.float64).reshape(shape)


def gradients(branch, data, label, params, mask, bf16):
    """Loss and gradients (parameters and c1's output) in float64, or in float32 under bf16 autocast."""
    dtype = torch.float32 if bf16 else torch.float64
    p = {k: v.to(dtype).requires_grad_(True) for k, v in params.items()}
    x = data.to(dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        c1 = F.conv2d(x, p["c1.weight"], p["c1.bias"], padding=1)
        c1.retain_grad()
        b = BRANCHES[branch][2](c1, mask)
        stride = 2 if branch == "pool" else 1
        c2 = F.conv2d(c1, p["c2.weight"], p["c2.bias"], stride=stride)
        s = b + c2
        logits = F.linear(s.flatten(1), p["fc.weight"], p["fc.bias"])
        loss = F.cross_entropy(logits.float() if bf16 else logits, label)
    loss.backward()
    grads = {f"grad.{k}": v.grad.float() for k, v in p.items()}
    grads["grad.c1"] = c1.grad.float()
    grads["loss"] = loss.detach().float().reshape(1)
    return grads


def run_case(branch, precision, generator, dropout_seed, workdir):
    data = torch.randn(BATCH, CHANNELS, SIZE, SIZE, generator=generator)
    label = torch.randint(0, CLASSES, (BATCH,), generator=generator)
    c2_kernel = 2 if branch == "pool" else 1
    out = SIZE // 2 if branch == "pool" else SIZE
    shapes = {
        "c1.weight": (WIDTH, CHANNELS, 3, 3), "c1.bias": (WIDTH,),
        "c2.weight": (WIDTH, WIDTH, c2_kernel, c2_kernel), "c2.bias": (WIDTH,),
        "fc.weight": (CLASSES, WIDTH * out * out), "fc.bias": (CLASSES,),
    }
    params = {k: torch.randn(s, generator=generator) * 0.4 for k, s in shapes.items()}
    mask = dropout_mask(dropout_seed, (BATCH, WIDTH, SIZE, SIZE)) if branch == "dropout" else None
    tensors = {"input.data": data, "input.label": label.float()}
    tensors.update({f"param.{k}": v for k, v in params.items()})
    tensors.update({f"ref.{k}": v for k, v in gradients(branch, data, label, params, mask, False).items()})
    if precision == "bf16":
        tensors.update({f"autocast.{k}": v for k, v in gradients(branch, data, label, params, mask, True).items()})
    safetensors_io.write(os.path.join(workdir, f"{branch}_{precision}.safetensors"), tensors,
                         {"model": model_file(branch), "precision": precision})


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workdir", required=True, help="where the reference files go")
    parser.add_argument("--dropout-seed", type=int, required=True,
                        help="the dropout layer's draw from the run's RNG in its forward")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    generator = torch.Generator().manual_seed(SEED)
    for branch in BRANCHES:
        for precision in ("fp32", "bf16"):
            run_case(branch, precision, generator, args.dropout_seed, args.workdir)
    print(f"{2 * len(BRANCHES)} cases written to {args.workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
