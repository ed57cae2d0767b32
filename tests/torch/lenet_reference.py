"""Trains LeNet for 5 SGD (or Adam) steps in poseidon and in PyTorch and compares them.

Usage: lenet_reference.py --poseidon BIN --repo REPO --workdir DIR [--solver adam] [--precision bf16]

Builds models/lenet.yaml's network in PyTorch with PyTorch's default
initialisation under a fixed seed, hands those weights and 320 Fashion-MNIST
training examples to `BIN train`, runs the same 5 steps (SGD, lr 0.01,
momentum 0.9, weight decay 5e-4, batches of 64 in order) in PyTorch, and
checks every per-iteration loss (relative error <= 1e-4) and every final
parameter: |poseidon - torch| <= 1e-4 * max(|torch|, 1e-3 * max|torch tensor|).

The examples are the first 320 of the training set whose steps make no
near-tie decision: ReLU and max pooling choose by comparing values, and
where the float64 reference compares two closer than 2^-20 of their
magnitude (a ReLU input near 0, a pool window's two largest), float32's
rounding, which differs from one set of kernels to another by up to some
2.5e-7 of that magnitude, may choose the other way; the gradient then flows
through another element and the result ends up to 1e-3 away whoever
computed it. Such examples (some 40 of the first 360) are left out, so that
what is compared is the arithmetic. (A bfloat16 run, whose own rounding is
2^-8, is judged as a whole against its peer's, below, and takes the first
320.)
Momentum buffers are sums of gradients, where float32 cancellation leaves
elements near zero with rounding of the order of the tensor's largest value,
so they are judged as whole tensors: ||poseidon - torch|| <= 1e-4 * ||torch||.
With --solver adam the steps are torch.optim.Adam's (lr 0.001, weight decay
5e-4, PyTorch's betas and eps), and its moments and step counts are judged
as the momentum buffers are, and so are its parameters: Adam divides each
gradient by its own running magnitude, so an element whose gradient is small
and carries float32 cancellation moves by a share of lr that rounding
decides, whatever its value (PyTorch's own float32 steps are off from its
float64 ones by 1.8e-3 on fc1.weight in the elementwise measure).
The PyTorch side computes in float64, so the reference carries no float32
rounding of its own.

With --precision bf16 poseidon trains with `precision: bf16` and PyTorch in
float32 under torch.autocast("cpu", dtype=torch.bfloat16), and what is
compared changes with the arithmetic. bfloat16 keeps 8 significant bits: each
rounding is off by up to u = 2^-8 of the value. The per-iteration losses
(means over 64 examples, where rounding errors average out) must agree
within 2u relative. Each parameter's update (final - initial: the parameters
barely move in 5 steps, so their own relative error would hide any
difference) and each momentum buffer is judged as a whole tensor against
the same 5 steps in float64, because near the start of training these
gradients are sums of many products that largely cancel: a rounding of u
per operand leaves some 3e-2 of the result in error, in autocast as in
poseidon, and two bfloat16 implementations differ by about as much as
either differs from the exact result. So with e = ||autocast - float64||
(autocast's own error), poseidon must be within 1.5 e of autocast (two
independent errors of size e differ by about sqrt(2) e), and its own error
||poseidon - float64|| between 0.5 e and 1.25 e: as accurate as autocast, and
bfloat16-sized (a run that ignored `precision` would be at float32's 1e-6).
The own error is judged over three initialisations (BF16_SEEDS), as the sum
of poseidon's errors against the sum of autocast's: poseidon's bf16 blobs
round where autocast's tensors do, so each run draws two errors of the same
size, and one draw of their ratio strays by some 30% either way (conv1's
weight update: 1.28 at seed 1, 0.91 at seed 3).
Where bf16 layers run no bfloat16 kernels (`poseidon info`'s `CPU bf16` line:
before AVX-512, or where they are slower than float32 ones), poseidon's
float32 kernels multiply the rounded operands and keep float32
results, where autocast's kernels, like oneDNN's bfloat16 convolutions,
round their results (the output, the input gradient, and autocast the
weight gradient too) to bfloat16 once more. Such a run is more accurate than
autocast (its own error 0.2 to 0.9 e on this model), so there the
lower bound, which tells bfloat16 from float32, is e / 10: still 2000 times
float32's error.
Exit status: 0 when everything matches, 1 otherwise.
"""

import argparse
import copy
import gzip
import json
import os
import struct
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from poseidon_training import losses_match, norm_relative_error, run_poseidon_train, write_idx  # noqa: E402

SEED = 1
BF16_SEEDS = (1, 2, 3)  # initialisations a bf16 run is judged over (see the docstring)
BATCH = 64
STEPS = 5
LR, MOMENTUM, WEIGHT_DECAY = 0.01, 0.9, 5e-4
ADAM_LR = 0.001
# solver -> (poseidon's solver config, PyTorch's optimizer of the parameters, the state tensors compared)
SOLVERS = {
    "sgd": (f"{{type: sgd, lr: {LR}, momentum: {MOMENTUM}, weight_decay: {WEIGHT_DECAY}, lr_policy: fixed, ",
            lambda params: torch.optim.SGD(params, lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY),
            ["momentum_buffer"]),
    "adam": (f"{{type: adam, lr: {ADAM_LR}, weight_decay: {WEIGHT_DECAY}, lr_policy: fixed, ",
             lambda params: torch.optim.Adam(params, lr=ADAM_LR, weight_decay=WEIGHT_DECAY),
             ["exp_avg", "exp_avg_sq", "step"]),
}
RTOL = 1e-4
BF16_U = 2.0 ** -8  # bfloat16's unit roundoff
BF16_LOSS_RTOL = 2 * BF16_U
BF16_FROM_AUTOCAST = 1.5  # x autocast's own error
BF16_OWN_ERROR = (0.5, 1.25)  # x autocast's own error
BF16_OWN_ERROR_FLOAT32_KERNELS = (0.1, 1.25)  # the same, on a CPU without bfloat16 kernels
FLOOR = 1e-3  # of the tensor's largest magnitude: elements near zero are judged against it
NEAR_TIE = 2.0 ** -20  # of a value's magnitude: 16 float32 roundings, closer than float32 can be trusted to order
CANDIDATES = 4 * BATCH * STEPS  # the examples the steps' examples are chosen from, in order
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


class LeNet(nn.Module):
    """models/lenet.yaml; attribute names give the checkpoint names."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        self.fc1 = nn.Linear(800, 500)
        self.fc2 = nn.Linear(500, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def pooled(t):
    """[N, C, H, W] -> [N, C, H/2, W/2, 4]: the 2x2 windows of a stride-2 max pool."""
    n, c, h, w = t.shape
    return t.reshape(n, c, h // 2, 2, w // 2, 2).permute(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)


def near_ties(model, x):
    """Per example of the float64 batch x: whether a ReLU or a max pool of the model's forward decides
    between values closer than NEAR_TIE of their magnitude (the sum of the absolute values of the terms
    that make each), where float32 rounding may decide the other way."""
    near = torch.zeros(x.shape[0], dtype=torch.bool)

    def relu(z, magnitude):
        nonlocal near
        near |= (z.abs() < NEAR_TIE * magnitude).flatten(1).any(1)
        return F.relu(z)

    def max_pool(y, magnitude):
        nonlocal near
        top2 = pooled(y).topk(2, dim=-1).values
        gap = top2[..., 0] - top2[..., 1]
        near |= ((gap > 0) & (gap < NEAR_TIE * pooled(magnitude).amax(-1))).flatten(1).any(1)
        return F.max_pool2d(y, 2, 2)

    def conv(layer, x):
        return layer(x), F.conv2d(x.abs(), layer.weight.abs(), layer.bias.abs())

    with torch.no_grad():
        z, m = conv(model.conv1, x)
        z, m = conv(model.conv2, max_pool(relu(z, m), m))
        y = max_pool(relu(z, m), m).flatten(1)
        relu(model.fc1(y), F.linear(y, model.fc1.weight.abs(), model.fc1.bias.abs()))
    return near


def choose_examples(model, images, labels, solver):
    """The indices of BATCH * STEPS examples among the candidates, in order, whose float64 steps (the
    reference's) make no near-tie decision (near_ties): where one does, float32 may route a gradient
    elsewhere than float64 and end far beyond its rounding, whichever kernels sum it. Runs the float64
    steps, drops the examples of the first step with such a decision and starts again. Returns the
    indices and the candidates dropped."""
    keep, dropped = list(range(CANDIDATES)), []
    while True:
        if len(keep) < BATCH * STEPS:
            raise SystemExit(f"too few examples clear of near-ties among the first {CANDIDATES}")
        chosen = keep[: BATCH * STEPS]
        trial = copy.deepcopy(model).double()
        opt = SOLVERS[solver][1](trial.parameters())
        near = []
        for step in range(STEPS):
            batch = chosen[step * BATCH : (step + 1) * BATCH]
            x = images[batch].float().div(255.0).double()
            near = [batch[i] for i in near_ties(trial, x).nonzero().flatten().tolist()]
            if near:
                break
            opt.zero_grad()
            F.cross_entropy(trial(x), labels[batch].long()).backward()
            opt.step()
        if not near:
            return chosen, dropped
        dropped += near
        keep = [i for i in keep if i not in near]


def read_idx_gz(path, count):
    """The first `count` records of a gzipped IDX ubyte file: (dims, payload)."""
    with gzip.open(path, "rb") as f:
        magic, n = struct.unpack(">II", f.read(8))
        ndim = magic & 0xFF
        dims = [n] + list(struct.unpack(">" + "I" * (ndim - 1), f.read(4 * (ndim - 1))))
        record = 1
        for d in dims[1:]:
            record *= d
        dims[0] = count
        return dims, f.read(count * record)


def write_config(path, repo, images, labels, out_dir, solver, precision, seed):
    q = json.dumps  # a JSON string is a valid YAML scalar, whatever the path holds
    with open(path, "w") as f:
        f.write(f"model: {q(os.path.join(repo, 'models', 'lenet.yaml'))}\n")
        f.write(f"seed: {seed}\nthreads: 2\nprecision: {precision}\n")
        f.write("data:\n")
        f.write(f"  train: {{source: idx, images: {q(images)}, labels: {q(labels)}, "
                f"batch_size: {BATCH}, shuffle: false}}\n")
        f.write(f"solver: {SOLVERS[solver][0]}max_iter: {STEPS}}}\n")
        f.write(f"train: {{display: 1, test_interval: 0, snapshot_interval: 0, output_dir: {q(out_dir)}}}\n")


def torch_training(model, images, labels, solver, precision):
    """Runs the steps in float64, or in float32 under bfloat16 autocast; returns per-iteration losses,
    parameters, optimizer state by checkpoint name."""
    bf16 = precision == "bf16"
    model = model.float() if bf16 else model.double()
    opt = SOLVERS[solver][1](model.parameters())
    losses = []
    for step in range(STEPS):
        x = images[step * BATCH : (step + 1) * BATCH].float().div(255.0)
        x = x if bf16 else x.double()
        y = labels[step * BATCH : (step + 1) * BATCH].long()
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    params = {name: p.detach() for name, p in model.named_parameters()}
    state = {f"optimizer.{name}.{key}": opt.state[p][key] for name, p in model.named_parameters()
             for key in SOLVERS[solver][2]}
    return losses, params, state


def max_relative_error(ours, ref):
    ref = ref.double()
    floor = FLOOR * ref.abs().max().item()
    scale = torch.clamp(ref.abs(), min=max(floor, 1e-30))
    return ((ours.double() - ref).abs() / scale).max().item()


def has_bf16_kernels(poseidon):
    """Whether `poseidon info` finds bfloat16 kernels on this CPU."""
    info = subprocess.run([poseidon, "info", "--json"], stdout=subprocess.PIPE, check=True, text=True).stdout
    return json.loads(info)["CPU bf16"].startswith("oneDNN's bfloat16 kernels")


def bf16_errors(final, initial, autocast_params, autocast_state, exact_params, exact_state):
    """Per update or state tensor: (poseidon's distance from autocast, poseidon's own distance from
    float64, autocast's own distance from float64), or None where poseidon lacks it or has another shape."""
    def update(params):
        return {name: p.double() - initial[name] for name, p in params.items()}
    ours = {name: t.double() - initial[name] if name in initial else t for name, t in final.items()}
    autocast = {**update(autocast_params), **autocast_state}
    exact = {**update(exact_params), **exact_state}
    errors = {}
    for name, ref in autocast.items():
        if name not in ours or tuple(ours[name].shape) != tuple(ref.shape):
            errors[name] = None
            continue
        errors[name] = (norm_relative_error(ours[name], ref), norm_relative_error(ours[name], exact[name]),
                        norm_relative_error(ref, exact[name]))
    return errors


def judge_bf16(runs, own_error):
    """Judges poseidon's bf16 updates and momentum buffers over the runs (one bf16_errors per seed): in
    each run within BF16_FROM_AUTOCAST of autocast's own error from autocast, and its own error, summed
    over the runs, within `own_error` times autocast's summed (see the module's docstring); returns True
    when all pass."""
    ok = True
    print(f"{'tensor (update or state)':<40} {'vs autocast (worst run)':>24} {'own / autocast (all runs)':>26}")
    for name in runs[0]:
        per_run = [run[name] for run in runs]
        if any(e is None for e in per_run):
            print(f"{name:<40} missing or misshapen  MISMATCH")
            ok = False
            continue
        apart = max(a / scale for a, _, scale in per_run)
        own = sum(o for _, o, _ in per_run) / sum(scale for _, _, scale in per_run)
        good = apart <= BF16_FROM_AUTOCAST and own_error[0] <= own <= own_error[1]
        ok = ok and good
        print(f"{name:<40} {apart:>24.2f} {own:>26.2f}{'' if good else '  MISMATCH'}")
    return ok


def train_both(args, work, seed, images, labels, image_dims, label_dims):
    """Initialises LeNet under `seed`, trains it with poseidon and with PyTorch on the examples; returns
    None where poseidon failed, else (whether the losses match, poseidon's final tensors, the initial
    parameters, PyTorch's parameters and state, and for bf16 those of float64 too)."""
    torch.manual_seed(seed)
    os.makedirs(work, exist_ok=True)
    model = LeNet()
    init_path = os.path.join(work, "init.safetensors")
    safetensors_io.write(init_path, {k: v.contiguous() for k, v in model.state_dict().items()},
                         {"source": "torch default init, seed %d" % seed})
    bf16 = args.precision == "bf16"
    if bf16:
        chosen = list(range(BATCH * STEPS))
        print(f"seed {seed}; examples: the first {len(chosen)} of Fashion-MNIST's training set")
    else:
        chosen, dropped = choose_examples(model, images, labels, args.solver)
        print(f"examples: the first {len(chosen)} of Fashion-MNIST's training set clear of near-ties; "
              f"left out: {dropped}")
    images, labels = images[chosen].contiguous(), labels[chosen].contiguous()
    count = len(chosen)
    images_path = os.path.join(work, "train-images-idx3-ubyte")
    labels_path = os.path.join(work, "train-labels-idx1-ubyte")
    write_idx(images_path, [count] + image_dims[1:], images.numpy().tobytes())
    write_idx(labels_path, [count] + label_dims[1:], labels.numpy().tobytes())

    out_dir = os.path.join(work, "out")
    config_path = os.path.join(work, "config.yaml")
    write_config(config_path, os.path.abspath(args.repo), images_path, labels_path, out_dir, args.solver,
                 args.precision, seed)
    if not run_poseidon_train(args.poseidon, config_path, init_path):
        return None

    initial = {name: p.detach().clone().double() for name, p in model.named_parameters()}
    exact_model = copy.deepcopy(model)
    ref_losses, ref_params, ref_state = torch_training(model, images, labels, args.solver,
                                                       "bf16" if bf16 else "fp32")
    losses_ok = losses_match(os.path.join(out_dir, "metrics.jsonl"), ref_losses,
                             BF16_LOSS_RTOL if bf16 else RTOL)
    final, _ = safetensors_io.read(os.path.join(out_dir, "final.safetensors"))
    exact = torch_training(exact_model, images, labels, args.solver, "fp32")[1:] if bf16 else None
    return losses_ok, final, initial, ref_params, ref_state, exact


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poseidon", required=True, help="the poseidon binary")
    parser.add_argument("--repo", required=True, help="the source tree (for models/lenet.yaml)")
    parser.add_argument("--workdir", required=True, help="a folder for data, weights and outputs")
    parser.add_argument("--solver", default="sgd", choices=sorted(SOLVERS), help="the update rule of both sides")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"], help="the arithmetic of both sides")
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    work = os.path.abspath(args.workdir)
    image_dims, image_bytes = read_idx_gz(os.path.join(FASHION_MNIST, "train-images-idx3-ubyte.gz"), CANDIDATES)
    label_dims, label_bytes = read_idx_gz(os.path.join(FASHION_MNIST, "train-labels-idx1-ubyte.gz"), CANDIDATES)
    images = torch.frombuffer(bytearray(image_bytes), dtype=torch.uint8).reshape(CANDIDATES, 1, 28, 28)
    labels = torch.frombuffer(bytearray(label_bytes), dtype=torch.uint8)

    if args.precision == "bf16":
        ok, runs = True, []
        for seed in BF16_SEEDS:
            trained = train_both(args, os.path.join(work, f"seed{seed}"), seed, images, labels, image_dims,
                                 label_dims)
            if trained is None:
                return 1
            losses_ok, final, initial, ref_params, ref_state, (exact_params, exact_state) = trained
            ok = ok and losses_ok
            runs.append(bf16_errors(final, initial, ref_params, ref_state, exact_params, exact_state))
        own_error = BF16_OWN_ERROR if has_bf16_kernels(args.poseidon) else BF16_OWN_ERROR_FLOAT32_KERNELS
        print(f"own error bounds: {own_error[0]} to {own_error[1]} times autocast's, over seeds {BF16_SEEDS}")
        ok = judge_bf16(runs, own_error) and ok
        print("PASS" if ok else "FAIL: poseidon's bf16 differs from PyTorch's autocast beyond the bounds")
        return 0 if ok else 1

    trained = train_both(args, work, SEED, images, labels, image_dims, label_dims)
    if trained is None:
        return 1
    ok, final, _, ref_params, ref_state, _ = trained
    by_element = args.solver != "adam"
    expected = {name: (ref, max_relative_error, "max elementwise") if by_element else (ref, norm_relative_error, "norm")
                for name, ref in ref_params.items()}
    for name, ref in ref_state.items():
        expected[name] = (ref, norm_relative_error, "norm")
    print(f"{'tensor':<40} {'shape':<16} {'rel err':>10}")
    for name, (ref, error, kind) in expected.items():
        ours = final.get(name)
        if ours is None or tuple(ours.shape) != tuple(ref.shape):
            found = "missing" if ours is None else f"shape {list(ours.shape)}"
            print(f"{name:<40} {str(list(ref.shape)):<16} {found}  MISMATCH")
            ok = False
            continue
        err = error(ours, ref)
        ok = ok and err <= RTOL
        verdict = "" if err <= RTOL else "  MISMATCH"
        print(f"{name:<40} {str(list(ref.shape)):<16} {err:>10.2e} ({kind}){verdict}")

    print("PASS" if ok else f"FAIL: poseidon differs from PyTorch by more than {RTOL} (relative)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
