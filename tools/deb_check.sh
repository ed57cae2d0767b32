#!/usr/bin/env bash
# Proves the .deb on a fresh machine: builds Poseidon without CUDA (a .deb
# depends on Debian packages only), packs it with cpack (cmake/package.cmake),
# makes a minimal Debian 12 root (debootstrap --variant=minbase bookworm),
# installs the package there with apt (which installs its Depends and
# Recommends from the mirror), copies in examples/custom_layer alone (no
# source tree) and builds it against the installed package, timed; then runs
# `poseidon --version` and the example's tests (its gradient check and 20
# training iterations with the plug-in). Passes when all of it succeeds and
# the plug-in's configure and build take under a minute. Needs root (chroot,
# mount) and the network (apt).
#
# Usage: tools/deb_check.sh [--build-dir DIR] [--root-tar TAR] [--dir DIR] [--keep] [--mirror URL]
#   --build-dir DIR  the build to pack (default: build-deb/, configured here
#                    with -DPOSEIDON_CUDA=OFF -DPOSEIDON_TESTS=OFF; `poseidon` built)
#   --root-tar TAR   unpack this minbase root instead of running debootstrap
#   --dir DIR        where the root goes (default: a new folder under /var/tmp)
#   --keep           leave the root in place afterwards
#   --mirror URL     debootstrap's mirror (default http://deb.debian.org/debian)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=""
root_tar=""
dir=""
keep=false
mirror=http://deb.debian.org/debian
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build=$(realpath "$2"); shift 2 ;;
    --root-tar) root_tar=$(realpath "$2"); shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --keep) keep=true; shift ;;
    --mirror) mirror=$2; shift 2 ;;
    *) echo "deb_check.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
script=deb_check.sh
# shellcheck source=tools/debian_root.sh
source "$repo/tools/debian_root.sh"
debian_root_needs_root
debian_root_folder deb
packed=$(mktemp -d)
also_remove+=("$packed")

echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC'): .deb check of $(git -C "$repo" rev-parse --short HEAD) in $dir"
start=$SECONDS
elapsed() { printf '%dm%02ds' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }
if [[ -z $build ]]; then
  build=$repo/build-deb
  echo "== building poseidon without CUDA in $build"
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPOSEIDON_CUDA=OFF -DPOSEIDON_TESTS=OFF >/dev/null
  cmake --build "$build" --target poseidon
fi
cpack --config "$build/CPackConfig.cmake" -B "$packed" | grep 'package:'
deb=$(ls "$packed"/poseidon_*.deb)
echo "== $(elapsed): $(basename "$deb"), Depends: $(dpkg-deb -f "$deb" Depends)"

debian_root_make
# The package and the example alone: nothing else of the repository.
cp "$deb" "$dir/root/"
cp -r "$repo/examples/custom_layer" "$dir/root/custom_layer"
rm -rf "$dir/root/custom_layer/build"
echo "== $(elapsed): root ready; apt-get install ./$(basename "$deb") in it"

in_root() {
  chroot "$dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -euo pipefail -c "$1"
}
in_root "apt-get update -q >/dev/null && apt-get install -y -q /root/$(basename "$deb") | grep -E '^(Setting up poseidon|[0-9]+ upgraded)'"
echo "== $(elapsed): installed; in the root:"
in_root 'command -v poseidon && poseidon --version && g++ --version | head -1 && cmake --version | head -1'
echo "== the plug-in: cmake -S custom_layer -B custom_layer/build && cmake --build custom_layer/build"
plugin_start=$(date +%s%N)
in_root 'cd /root/custom_layer && cmake -S . -B build >/dev/null && cmake --build build'
plugin_ms=$((($(date +%s%N) - plugin_start) / 1000000))
plugin_time=$(printf '%d.%d s' $((plugin_ms / 1000)) $((plugin_ms % 1000 / 100)))
echo "== plug-in configured and built in $plugin_time"
in_root 'cd /root/custom_layer && ctest --test-dir build --output-on-failure'
if ((plugin_ms < 60000)); then
  echo ".deb check: PASS in $(elapsed) (plug-in configure + build $plugin_time)"
else
  echo ".deb check: FAIL: the plug-in's configure + build took $plugin_time, over a minute"
  exit 1
fi
