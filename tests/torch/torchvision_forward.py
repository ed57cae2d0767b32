"""Writes a torchvision model's weights, an input and its eval-mode outputs.

Usage: torchvision_forward.py --model {vgg19,inception_v3,resnet50} --workdir DIR

Builds torchvision's randomly initialised model under a fixed seed. Batch
norm layers get random affine parameters and running statistics measured on
a separate random batch (so that eval mode really normalises, with means far
from 0 and variances far from 1). Writes, for tests/tools/torchvision_test.cpp:
  weights.safetensors    the state_dict (float32), under torchvision's names
  input.safetensors      "data": a random float32 batch
  reference.safetensors  eval-mode outputs computed in float64 from the same
                         float32 weights, keyed by the name of the poseidon
                         blob that must hold them (the logits, and a few
                         intermediate blocks to locate a mismatch)
For inception_v3 the auxiliary head, which torchvision skips in eval mode, is
run on Mixed_6e's output so that its numbers are checked as well.
"""

import argparse
import os
import sys

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

SEED = 1

# model -> (constructor, input size, batch, {torchvision module: poseidon blob})
MODELS = {
    "vgg19": (
        lambda: torchvision.models.vgg19(weights=None),
        224,
        1,
        {"features": "features.36", "classifier": "classifier.6"},
    ),
    "inception_v3": (
        lambda: torchvision.models.inception_v3(
            weights=None, aux_logits=True, transform_input=False, init_weights=True
        ),
        299,
        2,
        {
            "Conv2d_1a_3x3": "Conv2d_1a_3x3.relu",
            "Mixed_5b": "Mixed_5b.concat",
            "Mixed_6a": "Mixed_6a.concat",
            "Mixed_6e": "Mixed_6e.concat",
            "Mixed_7c": "Mixed_7c.concat",
            "AuxLogits": "AuxLogits.fc",
            "fc": "fc",
        },
    ),
    "resnet50": (
        lambda: torchvision.models.resnet50(weights=None),
        224,
        2,
        {"layer1": "layer1.2.relu", "layer2": "layer2.3.relu", "layer4": "layer4.2.relu", "fc": "fc"},
    ),
}


def randomise_batch_norm(model, size):
    """Random affine parameters, and running statistics of a random batch."""
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    if not bns:
        return
    with torch.no_grad():
        for bn in bns:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.normal_(0.0, 0.2)
            bn.momentum = None  # cumulative average: the statistics of the batch below
            bn.reset_running_stats()
        model.train()
        model(torch.rand(4, 3, size, size) * 2.0 - 0.5)
        for bn in bns:
            bn.momentum = 0.1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, choices=sorted(MODELS))
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()

    torch.manual_seed(SEED)
    make, size, batch, probes = MODELS[args.model]
    model = make()
    randomise_batch_norm(model, size)
    model.eval()
    os.makedirs(args.workdir, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    safetensors_io.write(os.path.join(args.workdir, "weights.safetensors"), state)
    x = torch.randn(batch, 3, size, size)
    safetensors_io.write(os.path.join(args.workdir, "input.safetensors"), {"data": x})

    model = model.double()
    captured = {}
    for module_name, blob in probes.items():
        module = model.get_submodule(module_name)
        module.register_forward_hook(lambda m, i, out, blob=blob: captured.__setitem__(blob, out.detach()))
    with torch.no_grad():
        model(x.double())
        if args.model == "inception_v3":
            model.AuxLogits(captured["Mixed_6e.concat"])
    missing = [blob for blob in probes.values() if blob not in captured]
    if missing:
        print(f"no output captured for {missing}")
        return 1
    safetensors_io.write(os.path.join(args.workdir, "reference.safetensors"), captured)
    print(f"{args.model}: {len(state)} tensors, input {list(x.shape)}, outputs {sorted(captured)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
