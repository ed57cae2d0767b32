#!/usr/bin/env bash
# Makes the wheel of the Python package from a build (the CPU build, with the
# CUDA backend where the build has it): python/make_wheel.sh BUILD_DIR OUT_DIR.
# Debian's python3-build, python3-setuptools and python3-wheel only: no
# isolated environment, nothing downloaded. Prints the wheel's path.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "$1" && pwd)"
mkdir -p "$2"
out="$(cd "$2" && pwd)"
python="${PYTHON:-/usr/bin/python3}"
[ -f "$build/python/poseidon/__init__.py" ] || { echo "error: $build/python/poseidon: no built package (build the target poseidon_python)" >&2; exit 2; }
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp "$here/setup.py" "$stage/"
cp -r "$build/python/poseidon" "$stage/poseidon"
rm -rf "$stage/poseidon/__pycache__"
version="$(PYTHONPATH="$build/python" "$python" -c 'import poseidon; print(poseidon.__version__)')"
POSEIDON_VERSION="$version" "$python" -m build --wheel --no-isolation --outdir "$out" "$stage" >&2
ls "$out"/poseidon-"$version"-*.whl
