"""What the training references share: IDX files for `poseidon train`, the run
itself, and the per-iteration losses it logs, judged against PyTorch's."""

import json
import struct
import subprocess


def write_idx(path, dims, payload):
    """An IDX ubyte file of shape `dims` holding `payload`."""
    with open(path, "wb") as f:
        f.write(struct.pack(">I", 0x0800 | len(dims)))
        f.write(struct.pack(">" + "I" * len(dims), *dims))
        f.write(payload)


def run_poseidon_train(poseidon, config_path, init_path, extra_args=()):
    """Runs `poseidon train` from the weights at init_path, prints its output; True on exit status 0."""
    run = subprocess.run([poseidon, "train", config_path, "--weights", init_path, *extra_args],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(run.stdout, end="")
    if run.returncode != 0:
        print(f"FAIL: {poseidon} train exited with status {run.returncode}")
    return run.returncode == 0


def logged_losses(metrics_path):
    """{iteration: loss} of the training records in a run's metrics.jsonl."""
    losses = {}
    with open(metrics_path) as f:
        for line in f:
            record = json.loads(line)
            if record.get("type") == "train":
                losses[record["iter"]] = record["loss"]
    return losses


def losses_match(metrics_path, reference, rtol):
    """Prints the run's losses beside `reference` (one per iteration from 1 on); True when each is
    logged and within rtol (relative)."""
    ours = logged_losses(metrics_path)
    ok = True
    print(f"{'iter':>4} {'poseidon loss':>16} {'torch loss':>16} {'rel err':>10}")
    for it, ref in enumerate(reference, start=1):
        if it not in ours:
            print(f"{it:>4} {'missing':>16} {ref:>16.8f}")
            ok = False
            continue
        err = abs(ours[it] - ref) / abs(ref)
        ok = ok and err <= rtol
        print(f"{it:>4} {ours[it]:>16.8f} {ref:>16.8f} {err:>10.2e}{'' if err <= rtol else '  MISMATCH'}")
    return ok


def norm_relative_error(ours, ref):
    """||ours - ref|| / ||ref||, in float64."""
    ref = ref.double()
    return ((ours.double() - ref).norm() / max(ref.norm().item(), 1e-30)).item()
