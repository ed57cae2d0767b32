"""The wheel (python/make_wheel.sh) installs with pip into a fresh venv,
offline, and the installed package, not the build's, imports, runs a
training step, and runs examples/python/train_fashion_mnist.py to the CLI's
losses and fc1 gradient."""
import os
import subprocess
import sys

from conftest import FASHION_MNIST, SOURCE_DIR
from test_acceptance import check_script_against_cli

BUILD_DIR = os.environ.get("POSEIDON_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))

STEP = """
import numpy as np, poseidon, sys
assert poseidon.__file__.startswith(sys.prefix), poseidon.__file__
config = poseidon.load_config("configs/fashion_mnist_lenet.yaml", ["data.train.batch_size=2", "solver.warmup_iters=0"])
net, solver = poseidon.Net(config), poseidon.Solver(config)
net.feed(np.ones((2, 1, 28, 28), np.float32), np.array([3, 7]))
first = net.forward()
net.backward()
solver.step(net)
assert net.forward() < first, "a step against the gradient lowers the loss"
print("ok", poseidon.__version__)
"""


def test_the_wheel_installs_in_a_fresh_venv_and_runs_a_step(tmp_path):
    made = subprocess.run([os.path.join(SOURCE_DIR, "python", "make_wheel.sh"), BUILD_DIR, str(tmp_path / "dist")],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    wheel = made.stdout.split()[-1]
    assert os.path.basename(wheel).startswith("poseidon-") and "linux" in wheel
    venv = tmp_path / "venv"
    # Debian's NumPy from the system; the package only from the wheel.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-cache-dir", wheel], check=True,
                   capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([python, "-c", STEP], capture_output=True, text=True, env=env, cwd=SOURCE_DIR)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")
    if os.path.isdir(FASHION_MNIST):
        check_script_against_cli(tmp_path, python=python, env=env)
