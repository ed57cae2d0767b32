"""Runs torch.optim's optimizers for 5 steps on fixed gradients, as references.

Usage: optim_reference.py --workdir DIR

For each case below, two parameters (a weight [7, 5] and a bias [5], values
and gradients drawn under a fixed seed in float32) go through 5 steps of the
torch.optim optimizer in float64. The bias sits in a second parameter group
with twice the learning rate and no weight decay, as poseidon's
bias_lr_mult: 2 and bias_decay_mult: 0 would give. Writes DIR/<case>.safetensors:
  init.<param>, grad.<step>.<param>   the inputs (float32)
  final.<param>                       the parameters after the steps
  optimizer.<param>.<state name>      the optimizer's state, PyTorch's names
and metadata: solver (the poseidon solver config, a YAML flow map), steps,
<param>.lr_mult and <param>.decay_mult.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import case_files  # noqa: E402
import safetensors_io  # noqa: E402

STEPS = 5
LR = 0.01
SHAPES = {"weight": (7, 5), "bias": (5,)}
MULTS = {"weight": (1.0, 1.0), "bias": (2.0, 0.0)}  # lr_mult, decay_mult

# case -> (poseidon solver config, torch optimizer class, its arguments besides lr and weight_decay, weight decay)
CASES = {
    "sgd_nesterov": ("{type: sgd, momentum: 0.9, nesterov: true, weight_decay: 0.01}", torch.optim.SGD,
                     {"momentum": 0.9, "nesterov": True}, 0.01),
    "adam": ("{type: adam}", torch.optim.Adam, {}, 0.0),
    "adam_l2": ("{type: adam, betas: [0.8, 0.99], eps: 1e-6, weight_decay: 0.05}", torch.optim.Adam,
                {"betas": (0.8, 0.99), "eps": 1e-6}, 0.05),
    "adamw": ("{type: adamw}", torch.optim.AdamW, {}, 0.01),
    "adamw_strong": ("{type: adamw, betas: [0.5, 0.9], weight_decay: 0.5}", torch.optim.AdamW,
                     {"betas": (0.5, 0.9)}, 0.5),
    "rmsprop": ("{type: rmsprop}", torch.optim.RMSprop, {}, 0.0),
    "rmsprop_centered_momentum": ("{type: rmsprop, alpha: 0.9, eps: 1e-6, momentum: 0.5, centered: true, "
                                  "weight_decay: 0.01}", torch.optim.RMSprop,
                                  {"alpha": 0.9, "eps": 1e-6, "momentum": 0.5, "centered": True}, 0.01),
}


def run_case(name, generator, workdir):
    solver, optimizer, kwargs, decay = CASES[name]
    init = {p: torch.rand(shape, generator=generator) * 2 - 1 for p, shape in SHAPES.items()}
    grads = [{p: torch.rand(shape, generator=generator) * 2 - 1 for p, shape in SHAPES.items()} for _ in range(STEPS)]
    params = {p: t.double().clone().requires_grad_(True) for p, t in init.items()}
    groups = [{"params": [params[p]], "lr": LR * MULTS[p][0], "weight_decay": decay * MULTS[p][1]} for p in SHAPES]
    opt = optimizer(groups, lr=LR, **kwargs)
    for step in range(STEPS):
        for p, t in params.items():
            t.grad = grads[step][p].double().clone()
        opt.step()
    tensors = {f"init.{p}": t for p, t in init.items()}
    for step, g in enumerate(grads):
        tensors.update({f"grad.{step}.{p}": t for p, t in g.items()})
    tensors.update({f"final.{p}": t.detach() for p, t in params.items()})
    for p, t in params.items():
        for key, value in opt.state[t].items():
            # Some optimizers count steps in a Python number, others in a tensor.
            if isinstance(value, (int, float)):
                value = torch.tensor(float(value))
            if torch.is_tensor(value):
                tensors[f"optimizer.{p}.{key}"] = value.double()
    metadata = {"solver": solver[:-1] + f", lr: {LR}}}", "steps": STEPS}
    for p, (lr_mult, decay_mult) in MULTS.items():
        metadata[f"{p}.lr_mult"] = lr_mult
        metadata[f"{p}.decay_mult"] = decay_mult
    safetensors_io.write(os.path.join(workdir, f"{name}.safetensors"), tensors, metadata)


if __name__ == "__main__":
    sys.exit(case_files.main(__doc__.splitlines()[0], CASES, run_case, seed=5))
