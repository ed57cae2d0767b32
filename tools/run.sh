#!/usr/bin/env bash
# The main job: installs what is missing of tools/packages.txt, builds, and
# trains LeNet on Fashion-MNIST (configs/fashion_mnist_lenet.yaml). Extra
# arguments go to `poseidon train` (e.g. --set solver.max_iter=1000).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/deps.sh" "$root/tools/packages.txt"
"$root/tools/build.sh" poseidon
cd "$root"
exec "$root/build/poseidon" train configs/fashion_mnist_lenet.yaml "$@"
