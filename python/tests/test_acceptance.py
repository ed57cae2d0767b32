"""examples/python/train_fashion_mnist.py against the CLI: LeNet trained on
Fashion-MNIST from a NumPy data source by the CLI's Trainer gives the CLI's
losses at every iteration and its test result (same seed, same batches), and
fc1's gradient read as a NumPy array equals `poseidon gradients`' dump."""
import json
import os
import subprocess
import sys

import numpy as np

from conftest import BINARY, SOURCE_DIR, cli, read_safetensors, requires_fashion_mnist

SCRIPT = os.path.join(SOURCE_DIR, "examples", "python", "train_fashion_mnist.py")
SHORT_RUN = ["solver.max_iter=12", "train.display=1", "train.test_interval=0", "train.snapshot_interval=0",
             "train.test_iters=1", "solver.warmup_iters=2"]


def records(output_dir, kind):
    with open(os.path.join(output_dir, "metrics.jsonl")) as f:
        return [r for r in map(json.loads, f) if r["type"] == kind]


def sets(overrides):
    return [word for o in overrides for word in ("--set", o)]


def run_cli_and_script(tmp_path, launcher=(), python=sys.executable, env=None):
    cli_dir, py_dir = str(tmp_path / "cli"), str(tmp_path / "python")
    cli_run = [*launcher, BINARY, "train", "configs/fashion_mnist_lenet.yaml", "--quiet",
               *sets(SHORT_RUN + ["data.train.shuffle=false", "train.output_dir=" + cli_dir])]
    subprocess.run(cli_run, check=True, capture_output=True)
    grad_file = str(tmp_path / "fc1_grad.npy")
    script = [*launcher, python, SCRIPT, grad_file, *SHORT_RUN, "train.output_dir=" + py_dir]
    done = subprocess.run(script, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return cli_dir, py_dir, grad_file


def check_script_against_cli(tmp_path, python=sys.executable, env=None):
    cli_dir, py_dir, grad_file = run_cli_and_script(tmp_path, python=python, env=env)
    cli_losses = [(r["iter"], r["loss"]) for r in records(cli_dir, "train")]
    assert len(cli_losses) == 12
    assert [(r["iter"], r["loss"]) for r in records(py_dir, "train")] == cli_losses
    cli_test, py_test = records(cli_dir, "test"), records(py_dir, "test")
    assert [(r["loss"], r["accuracy"]) for r in py_test] == [(r["loss"], r["accuracy"]) for r in cli_test]
    assert os.path.isfile(os.path.join(py_dir, "final.safetensors"))

    dump = str(tmp_path / "grads.safetensors")
    cli("gradients", "configs/fashion_mnist_lenet.yaml", "--weights", os.path.join(cli_dir, "final.safetensors"),
        "-o", dump, *sets(SHORT_RUN + ["data.train.shuffle=false"]))
    expected = read_safetensors(dump)["fc1.weight"]
    got = np.load(grad_file)
    assert got.shape == (500, 800) and np.abs(got).max() > 0
    np.testing.assert_array_equal(got, expected)


@requires_fashion_mnist
def test_the_script_trains_as_the_cli_does(tmp_path):
    check_script_against_cli(tmp_path)
