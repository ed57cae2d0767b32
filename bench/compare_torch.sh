#!/usr/bin/env bash
# The one command for the CPU comparison against PyTorch: builds the engine in
# Release (incrementally) into build/, makes sure bench/.venv holds PyTorch,
# then times lenet, cifar10_quick, vgg_small and resnet_small in both at
# batch 64, mlp_2048 at batch 128, and VGG19-22K at 32x32 and Inception-V3 at
# 75x75 at batch 32, on 2 threads. Arguments go to compare_torch.py (e.g.
# --rounds 9, --json out.json, --precision bf16, --models mlp_2048, --compile
# for PyTorch under torch.compile beside eager).
# POSEIDON_BUILD_DIR picks another build folder.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${POSEIDON_BUILD_DIR:-$root/build}

source "$root/bench/release_build.sh"
release_build compare_torch "$build"
cmake --build "$build" --target poseidon

"$root/bench/setup_venv.sh"
exec "$root/bench/.venv/bin/python" "$root/bench/compare_torch.py" --poseidon "$build/poseidon" "$@"
