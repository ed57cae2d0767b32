#!/usr/bin/env bash
# tools/check_packages.py must catch a package list that lacks a package the
# build uses: a copy of tools/packages.txt without libopenmpi-dev (dist/
# includes its mpi.h) must fail, naming libopenmpi-dev and the header.
#   tests/tools/check_packages_test.sh BUILD_DIR BINARY...
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
grep -v '^libopenmpi-dev[[:space:]]' "$root/tools/packages.txt" >"$work/planted.txt"
if cmp -s "$root/tools/packages.txt" "$work/planted.txt"; then
  echo "FAIL: tools/packages.txt has no libopenmpi-dev line to take out"
  exit 1
fi
status=0
python3 "$root/tools/check_packages.py" --list "$work/planted.txt" --build-dir "$build" "$@" >"$work/out.txt" || status=$?
cat "$work/out.txt"
if [[ $status -ne 1 ]]; then
  echo "FAIL: the check exited with status $status on a list without libopenmpi-dev (expected 1)"
  exit 1
fi
if ! grep -q '^MISSING package libopenmpi-dev: provides /.*/mpi\.h, included by ' "$work/out.txt"; then
  echo "FAIL: the check did not name libopenmpi-dev and the mpi.h it provides"
  exit 1
fi
echo "PASS: the list without libopenmpi-dev fails, naming it"
