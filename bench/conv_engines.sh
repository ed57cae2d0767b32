#!/usr/bin/env bash
# The conv layer's oneDNN direct kernels against its Winograd engine on the
# 3x3 convolutions of vgg_small, resnet_small and VGG19 at 32x32: forward plus
# backward of the layer, alternating, with the engine `auto` picks on this
# CPU (bench/conv_engines.py).
#
#   bench/conv_engines.sh [--rounds 5] [--iters 3] [--threads 2]
#
# POSEIDON_BUILD_DIR picks the build folder (default build/, a Release build).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${POSEIDON_BUILD_DIR:-$root/build}

source "$root/bench/release_build.sh"
release_build conv_engines "$build"
cmake --build "$build" --target poseidon >/dev/null
exec python3 "$root/bench/conv_engines.py" --poseidon "$build/poseidon" "$@"
