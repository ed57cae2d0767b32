#!/usr/bin/env bash
# The Debian package `cpack` makes of the build folder $1 (cmake/package.cmake).
# A build without CUDA ($2 = OFF): the package holds the CLI, the SDK's
# headers and its CMake package; every library the packaged `poseidon` loads
# belongs to a package its Depends names (dpkg-shlibdeps), with the SDK's
# libyaml-cpp-dev; and examples/custom_layer, built against the package's
# files unpacked with `dpkg -x` (no source tree on its include path), passes
# its gradient check. A build with CUDA ($2 = ON): cpack refuses, naming
# -DPOSEIDON_CUDA=OFF, since its CUDA libraries belong to no Debian package.
# The install on a fresh Debian root is tools/deb_check.sh.
set -euo pipefail
build="$1"
with_cuda="$2"
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

status=0
cpack --config "$build/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log" 2>&1 || status=$?
if [[ $with_cuda == ON ]]; then
  [[ $status -ne 0 ]] || fail "cpack packaged a build with the CUDA backend"
  grep -q -- "-DPOSEIDON_CUDA=OFF" "$work/cpack.log" || { cat "$work/cpack.log"; fail "cpack's refusal does not name -DPOSEIDON_CUDA=OFF"; }
  echo "cpack refuses the CUDA build: $(grep -m1 -o 'This build has the CUDA backend[^:]*' "$work/cpack.log")"
  exit 0
fi
[[ $status -eq 0 ]] || { cat "$work/cpack.log"; fail "cpack exited with $status"; }
deb=$(ls "$work"/out/poseidon_*.deb)

listing=$(dpkg-deb -c "$deb" | awk '{print $6}')
for file in ./usr/bin/poseidon ./usr/include/poseidon/core/layer.h ./usr/include/poseidon/core/plugin.h \
            ./usr/include/poseidon/core/registry.h ./usr/lib/cmake/Poseidon/PoseidonConfig.cmake \
            ./usr/lib/cmake/Poseidon/PoseidonTargets.cmake; do
  grep -qxF "$file" <<<"$listing" || fail "$file is not in $(basename "$deb")"
done

depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
# Whether Depends names package $1 (alone or as an alternative).
named() { tr ',|' '\n\n' <<<"$depends" | awk '{print $1}' | grep -qxF "$1"; }
named libyaml-cpp-dev || fail "Depends lacks libyaml-cpp-dev, the headers of the SDK's find_dependency(yaml-cpp)"
# The owner of each library, as dpkg knows it (/lib or /usr/lib: merged /usr).
owner() {
  local path candidate
  for path in "$1" "$(realpath "$1")"; do
    for candidate in "$path" "${path#/usr}" "/usr$path"; do
      dpkg-query -S "$candidate" 2>/dev/null | head -1 | cut -d: -f1 && return 0
    done
  done
  return 1
}
dpkg -x "$deb" "$work/root"
# The libraries the executable names itself (NEEDED), where ldd finds them.
needed=$(readelf -d "$work/root/usr/bin/poseidon" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[[ -n $needed ]] || fail "the packaged poseidon names no library"
resolved=$(ldd "$work/root/usr/bin/poseidon")
for name in $needed; do
  library=$(awk -v n="$name" '$1 == n && $2 == "=>" {print $3} $1 ~ "/" n "$" {print $1}' <<<"$resolved" | head -1)
  [[ -n $library ]] || fail "ldd does not find $name, which poseidon needs"
  package=$(owner "$library") || fail "$library (needed by poseidon) belongs to no Debian package"
  named "$package" || fail "$library belongs to $package, which Depends does not name"
done
echo "the $(wc -w <<<"$needed") libraries poseidon needs belong to packages Depends names"

cmake -S "$root/examples/custom_layer" -B "$work/example" -G Ninja -DCMAKE_PREFIX_PATH="$work/root/usr" >/dev/null
grep -q "^Poseidon_DIR:PATH=$work/root/usr/lib/cmake/Poseidon$" "$work/example/CMakeCache.txt" ||
  fail "the example did not find the package's CMake files: $(grep '^Poseidon_DIR' "$work/example/CMakeCache.txt")"
grep -q -- "-isystem $work/root/usr/include/poseidon" "$work/example/build.ninja" ||
  fail "the example's compile lines lack the package's include folder"
! grep -qE -- "-(I|isystem) ?$root( |/)" "$work/example/build.ninja" || fail "the example includes from the source tree"
cmake --build "$work/example"
ctest --test-dir "$work/example" -R check_layer --output-on-failure
