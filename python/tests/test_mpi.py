"""Under mpirun the package trains as `poseidon train` does: two ranks of
examples/python/train_fashion_mnist.py, each feeding its shard of the data,
give the losses of the CLI's two-rank run."""
import shutil

import pytest

from conftest import requires_fashion_mnist
from test_acceptance import records, run_cli_and_script

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]


@requires_fashion_mnist
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun missing (openmpi-bin)")
def test_two_ranks_train_as_the_cli_does(tmp_path):
    cli_dir, py_dir, _ = run_cli_and_script(tmp_path, MPIRUN)
    cli_losses = [(r["iter"], r["loss"]) for r in records(cli_dir, "train")]
    assert len(cli_losses) == 12
    assert [(r["iter"], r["loss"]) for r in records(py_dir, "train")] == cli_losses
    assert records(py_dir, "test") and [r["accuracy"] for r in records(py_dir, "test")] == [
        r["accuracy"] for r in records(cli_dir, "test")]
