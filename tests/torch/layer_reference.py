"""Runs PyTorch's versions of poseidon's layers forward and backward, as references.

Usage: layer_reference.py --workdir DIR

For each case below: inputs, parameters and an output gradient drawn under a
fixed seed in float32, then PyTorch's function forward and backward in
float64. Writes DIR/<case>.safetensors:
  input.<k>, param.<suffix>, out_grad   what the layer is given
  output, input_grad.<k>, param_grad.<suffix>   what PyTorch computes
and metadata "layer": the poseidon layer config (a YAML flow map).
"""

import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import case_files  # noqa: E402
import safetensors_io  # noqa: E402

SHAPE = (2, 6, 4, 5)

# case -> (poseidon layer config, input shapes, parameter shapes by suffix, PyTorch function of (inputs, params))
CASES = {
    "sigmoid": ("{name: a, type: sigmoid}", [SHAPE], {}, lambda x, p: torch.sigmoid(x[0])),
    "tanh": ("{name: a, type: tanh}", [SHAPE], {}, lambda x, p: torch.tanh(x[0])),
    "gelu": ("{name: a, type: gelu}", [SHAPE], {}, lambda x, p: F.gelu(x[0])),
    "gelu_tanh": ("{name: a, type: gelu, approximate: tanh}", [SHAPE], {},
                  lambda x, p: F.gelu(x[0], approximate="tanh")),
    "leaky_relu": ("{name: a, type: leaky_relu}", [SHAPE], {}, lambda x, p: F.leaky_relu(x[0])),
    "leaky_relu_slope": ("{name: a, type: leaky_relu, negative_slope: 0.3}", [SHAPE], {},
                         lambda x, p: F.leaky_relu(x[0], 0.3)),
    "prelu": ("{name: a, type: prelu}", [SHAPE], {"weight": (SHAPE[1],)}, lambda x, p: F.prelu(x[0], p["weight"])),
    "prelu_shared": ("{name: a, type: prelu, channel_shared: true}", [SHAPE], {"weight": (1,)},
                     lambda x, p: F.prelu(x[0], p["weight"])),
    "lrn": ("{name: a, type: lrn, local_size: 5, alpha: 0.05, beta: 0.75, k: 2}", [SHAPE], {},
            lambda x, p: F.local_response_norm(x[0], 5, alpha=0.05, beta=0.75, k=2.0)),
    "lrn_even": ("{name: a, type: lrn, local_size: 4, alpha: 0.3, beta: 1.2, k: 1.5}", [SHAPE], {},
                 lambda x, p: F.local_response_norm(x[0], 4, alpha=0.3, beta=1.2, k=1.5)),
    "lrn_defaults": ("{name: a, type: lrn}", [SHAPE], {}, lambda x, p: F.local_response_norm(x[0], 5)),
    "eltwise_prod": ("{name: a, type: eltwise, operation: prod}", [SHAPE] * 3, {}, lambda x, p: x[0] * x[1] * x[2]),
    "eltwise_max": ("{name: a, type: eltwise, operation: max}", [SHAPE] * 3, {},
                    lambda x, p: torch.stack(x).max(dim=0).values),
}


def run_case(name, generator, workdir):
    config, input_shapes, param_shapes, function = CASES[name]
    inputs = [torch.randn(s, generator=generator) * 2 for s in input_shapes]
    params = {k: torch.rand(s, generator=generator) * 2 - 1 for k, s in param_shapes.items()}
    xs = [x.double().requires_grad_(True) for x in inputs]
    ps = {k: v.double().requires_grad_(True) for k, v in params.items()}
    out = function(xs, ps)
    out_grad = torch.randn(out.shape, generator=generator)
    out.backward(out_grad.double())
    tensors = {f"input.{k}": x for k, x in enumerate(inputs)}
    tensors.update({f"param.{k}": v for k, v in params.items()})
    tensors["out_grad"] = out_grad
    tensors["output"] = out.detach()
    tensors.update({f"input_grad.{k}": x.grad for k, x in enumerate(xs)})
    tensors.update({f"param_grad.{k}": v.grad for k, v in ps.items()})
    safetensors_io.write(os.path.join(workdir, f"{name}.safetensors"), tensors, {"layer": config})


if __name__ == "__main__":
    sys.exit(case_files.main(__doc__.splitlines()[0], CASES, run_case, seed=3))
