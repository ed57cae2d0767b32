"""Trains a benchmark model a step or two in poseidon and in PyTorch and compares.

Usage: train_step_reference.py --case CASE --poseidon BIN --repo REPO --workdir DIR

Cases (reduced versions of the same model files, set through their vars):
  vgg19_22k_32      VGG19-22K at 32x32 with all 21,841 classes, so every one of
                    its 229,052,817 parameters takes part; 2 steps
  inception_v3_aux  Inception-V3 with its auxiliary head (loss weight 0.4) and
                    10 classes; the head needs the full 299x299 input; 1 step

torchvision builds the model (dropout 0 on both sides) with its own
initialisation under a fixed seed; `BIN train` starts from those weights
(--weights) on random images written as an IDX ubyte file [N, 3, H, W], and
PyTorch runs the same SGD steps (lr 0.01, momentum 0.9, weight decay 5e-4,
batches in order) in float64. Relative errors: a parameter is judged by
max|poseidon - torch| / max|torch| over the tensor (biases start at zero, so
after a step they are pure gradient, with float32 rounding of the order of
their largest element); running statistics and momentum buffers by
||poseidon - torch|| / ||torch||, as the LeNet reference does.

The losses, and for VGG every tensor, must match to 1e-4. Inception-V3's
gradients cannot: a network of 94 batch-normalised layers in training mode is
so ill-conditioned at initialisation that a 1e-7 relative change of its
input moves its float64 gradients by about 2%, and PyTorch's own float32 step
is off from its float64 step by that much. So its parameters and momentum
buffers are held to PyTorch's float32 accuracy instead: PyTorch runs the step
in float32 too, and poseidon's worst and median errors in each group must be
at most twice PyTorch float32's. Its running statistics, which depend on the
forward pass only, must still match to 1e-4. Exit status 0 when all hold.
"""

import argparse
import copy
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from poseidon_training import losses_match, norm_relative_error, run_poseidon_train, write_idx  # noqa: E402

SEED = 1
LR, MOMENTUM, WEIGHT_DECAY = 0.01, 0.9, 5e-4
AUX_WEIGHT = 0.4
RTOL = 1e-4


def inception(classes, aux):
    return torchvision.models.inception_v3(
        weights=None, num_classes=classes, aux_logits=aux, transform_input=False, init_weights=True, dropout=0.0
    )


# case -> (model file, constructor, input size, classes, auxiliary head, batch, steps,
#          model variables, judged against PyTorch's float32 accuracy)
CASES = {
    "vgg19_22k_32": ("vgg19_22k.yaml", lambda: torchvision.models.vgg19(weights=None, num_classes=21841, dropout=0.0),
                     32, 21841, False, 2, 2, {"size": 32, "dropout": 0}, False),
    "inception_v3_aux": ("inception_v3.yaml", lambda: inception(10, True), 299, 10, True, 2, 1,
                         {"size": 299, "num_classes": 10, "aux": "true", "dropout": 0}, True),
}
FLOAT32_FACTOR = 2.0


def write_config(path, model, images, labels, batch, steps, out_dir):
    q = json.dumps  # a JSON string is a valid YAML scalar, whatever the path holds
    with open(path, "w") as f:
        f.write(f"model: {q(model)}\nseed: {SEED}\nthreads: 2\n")
        f.write(f"data:\n  train: {{source: idx, images: {q(images)}, labels: {q(labels)}, "
                f"batch_size: {batch}, shuffle: false}}\n")
        f.write(f"solver: {{type: sgd, lr: {LR}, momentum: {MOMENTUM}, weight_decay: {WEIGHT_DECAY}, "
                f"lr_policy: fixed, max_iter: {steps}}}\n")
        f.write(f"train: {{display: 1, test_interval: 0, snapshot_interval: 0, output_dir: {q(out_dir)}}}\n")


def torch_training(model, images, labels, batch, steps, aux, dtype):
    """Runs the steps; returns per-iteration losses and {group: {checkpoint name: tensor}}."""
    model = model.to(dtype).train()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    losses = []
    for step in range(steps):
        x = images[step * batch : (step + 1) * batch].to(dtype).div(255.0)
        y = labels[step * batch : (step + 1) * batch].long()
        opt.zero_grad()
        out = model(x)
        if aux:
            loss = F.cross_entropy(out.logits, y) + AUX_WEIGHT * F.cross_entropy(out.aux_logits, y)
        else:
            loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    opt.zero_grad(set_to_none=True)  # the momentum buffers hold what is compared; free the memory
    tensors = {
        "parameter": {name: p.detach() for name, p in model.named_parameters()},
        "running statistic": {name: b for name, b in model.named_buffers() if not name.endswith("num_batches_tracked")},
        "momentum buffer": {f"optimizer.{name}.momentum_buffer": opt.state[p]["momentum_buffer"]
                            for name, p in model.named_parameters()},
    }
    return losses, tensors


def max_norm_relative_error(ours, ref):
    ref = ref.double()
    return ((ours.double() - ref).abs().max() / max(ref.abs().max().item(), 1e-30)).item()


ERROR = {"parameter": max_norm_relative_error, "running statistic": norm_relative_error,
         "momentum buffer": norm_relative_error}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", required=True, choices=sorted(CASES))
    parser.add_argument("--poseidon", required=True, help="the poseidon binary")
    parser.add_argument("--repo", required=True, help="the source tree (for models/)")
    parser.add_argument("--workdir", required=True, help="a folder for data, weights and outputs")
    args = parser.parse_args()
    model_file, make, size, classes, aux, batch, steps, model_vars, float32_baseline = CASES[args.case]

    torch.set_num_threads(2)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(SEED)
    os.makedirs(args.workdir, exist_ok=True)
    work = os.path.abspath(args.workdir)

    model = make()
    init_path = os.path.join(work, "init.safetensors")
    safetensors_io.write(init_path, {k: v.contiguous() for k, v in model.state_dict().items()
                                     if not k.endswith("num_batches_tracked")},
                         {"source": f"torchvision init, seed {SEED}"})

    count = batch * steps
    images = torch.randint(0, 256, (count, 3, size, size), dtype=torch.uint8)
    # IDX ubyte labels hold 0..255: the 22K model sees labels among its first 256 classes.
    labels = torch.randint(0, min(classes, 256), (count,), dtype=torch.uint8)
    images_path = os.path.join(work, "images-idx4-ubyte")
    labels_path = os.path.join(work, "labels-idx1-ubyte")
    write_idx(images_path, [count, 3, size, size], images.numpy().tobytes())
    write_idx(labels_path, [count], labels.numpy().tobytes())

    out_dir = os.path.join(work, "out")
    config_path = os.path.join(work, "config.yaml")
    write_config(config_path, os.path.join(os.path.abspath(args.repo), "models", model_file), images_path,
                 labels_path, batch, steps, out_dir)
    overrides = [arg for k, v in model_vars.items() for arg in ("--set", f"net.vars.{k}={v}")]
    if not run_poseidon_train(args.poseidon, config_path, init_path, overrides):
        return 1

    baseline = None
    if float32_baseline:
        baseline = torch_training(copy.deepcopy(model), images, labels, batch, steps, aux, torch.float32)
    ref_losses, ref_tensors = torch_training(model, images, labels, batch, steps, aux, torch.float64)
    ok = losses_match(os.path.join(out_dir, "metrics.jsonl"), ref_losses, RTOL)

    final, _ = safetensors_io.read(os.path.join(out_dir, "final.safetensors"))
    count = 0
    for group, refs in ref_tensors.items():
        error = ERROR[group]
        ours = {}
        for name, ref in refs.items():
            mine = final.get(name)
            if mine is None or tuple(mine.shape) != tuple(ref.shape):
                found = "missing" if mine is None else f"shape {list(mine.shape)}"
                print(f"{name:<60} {str(list(ref.shape)):<20} {found}  MISMATCH")
                ok = False
                continue
            ours[name] = error(mine, ref)
        count += len(ours)
        if not ours:
            continue
        worst = max(ours, key=ours.get)
        median = statistics.median(ours.values())
        print(f"{group + 's':<18} poseidon: worst {ours[worst]:.2e} ({worst}), median {median:.2e}")
        if baseline is None or group == "running statistic":
            for name, err in ours.items():
                if err > RTOL:
                    ok = False
                    print(f"  {name:<60} {err:>10.2e}  MISMATCH")
            continue
        theirs = [error(baseline[1][group][name], refs[name]) for name in ours]
        limits = (FLOAT32_FACTOR * max(theirs), FLOAT32_FACTOR * statistics.median(theirs))
        print(f"{'':<18} torch float32: worst {max(theirs):.2e}, median {statistics.median(theirs):.2e}")
        if ours[worst] > limits[0] or median > limits[1]:
            ok = False
            print(f"  {group}s: more than {FLOAT32_FACTOR}x PyTorch float32's error  MISMATCH")
    print(f"{count} tensors compared")
    print("PASS" if ok else "FAIL: poseidon differs from PyTorch beyond the stated tolerances")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
