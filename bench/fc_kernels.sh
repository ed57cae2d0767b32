#!/usr/bin/env bash
# The kernels of the fc layer's float32 backward products: oneDNN's first
# choice against its JIT GEMM, which the layer asks for, and at small batches
# the layer's own weight-gradient kernel against that GEMM; median
# milliseconds of each and their ratio, on the fc shapes of mlp_2048,
# VGG19-22K at 32x32 and lenet, 2 threads (bench/fc_kernels.cpp).
#
#   bench/fc_kernels.sh [rounds=15]
#
# POSEIDON_BUILD_DIR picks the build folder (default build/, a Release build).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${POSEIDON_BUILD_DIR:-$root/build}

source "$root/bench/release_build.sh"
run_onednn_bench fc_kernels "$build" fc_kernels_bench "$@"
