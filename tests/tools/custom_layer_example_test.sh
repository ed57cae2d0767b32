#!/usr/bin/env bash
# The out-of-tree path of docs/EXTENDING.md: installs the framework from the
# build folder $1 into a temporary prefix, builds examples/custom_layer
# against it through find_package(Poseidon) and runs the example's own tests
# (its gradient check and a few training iterations).
set -euo pipefail
build="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$root/examples/custom_layer" -B "$work/example" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/example"
ctest --test-dir "$work/example" --output-on-failure
