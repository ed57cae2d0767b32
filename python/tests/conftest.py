"""Shared by the Python package's tests: where the sources and the poseidon
binary are (ctest sets POSEIDON_SOURCE_DIR and POSEIDON_BINARY), and a clean
skip where the package was not built."""
import os
import subprocess

import pytest

pytest.importorskip("numpy")
pytest.importorskip("poseidon", reason="the Python package was not built (pybind11-dev missing)")

SOURCE_DIR = os.environ.get("POSEIDON_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("POSEIDON_BINARY", os.path.join(SOURCE_DIR, "build", "poseidon"))
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"


@pytest.fixture(autouse=True)
def in_source_dir(monkeypatch):
    """Configs name their models relative to the source tree's configs/."""
    monkeypatch.chdir(SOURCE_DIR)


def cli(*args, check=True):
    """Runs the poseidon binary; returns the completed process."""
    done = subprocess.run([BINARY, *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"poseidon {' '.join(args)}: exit {done.returncode}\n{done.stderr}")
    return done


def read_safetensors(path):
    """{name: float32 array} of a safetensors file of F32 entries."""
    import json

    import numpy as np

    raw = open(path, "rb").read()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(raw[8 + size + begin : 8 + size + end], np.float32).reshape(entry["shape"])
    return out


requires_fashion_mnist = pytest.mark.skipif(not os.path.isdir(FASHION_MNIST), reason="dataset-fashion-mnist missing")
