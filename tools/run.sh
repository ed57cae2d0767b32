#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains LeNet on
# Fashion-MNIST (configs/fashion_mnist_lenet.yaml). Extra arguments go to
# `poseidon train` (e.g. --set solver.max_iter=1000).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/deps.sh" build-essential cmake ninja-build pkg-config libyaml-cpp-dev libopenblas-dev libopenblas-openmp-dev \
  libcli11-dev nlohmann-json3-dev zlib1g-dev libgtest-dev libopencv-core-dev libopencv-imgproc-dev \
  libopencv-imgcodecs-dev libdnnl-dev dataset-fashion-mnist
"$root/tools/build.sh" poseidon
cd "$root"
exec "$root/build/poseidon" train configs/fashion_mnist_lenet.yaml "$@"
