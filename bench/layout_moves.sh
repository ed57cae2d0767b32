#!/usr/bin/env bash
# The conv layer's moves of float32 and bfloat16 activations between NCHW
# and oneDNN's channel blocks (nChw16c with AVX-512, nChw8c with AVX2): its
# own transposes against oneDNN's reorders, median microseconds of each and
# reorder / transpose, on the activation shapes of resnet_small and
# vgg_small at batch 64, 2 threads.
#
#   bench/layout_moves.sh [rounds=41]
#
# POSEIDON_BUILD_DIR picks the build folder (default build/, a Release build).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${POSEIDON_BUILD_DIR:-$root/build}

source "$root/bench/release_build.sh"
run_onednn_bench layout_moves "$build" layout_moves_bench "$@"
