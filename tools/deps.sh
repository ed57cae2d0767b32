#!/usr/bin/env bash
# Installs the Debian packages of the given lists that are missing (shared by
# run.sh and test.sh, so both read the same tools/packages.txt). A list has
# one package a line; '#' starts a comment. Uses sudo when not root.
#   tools/deps.sh LIST...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: tools/deps.sh LIST..." >&2; exit 2; }
missing=()
for list in "$@"; do
  while read -r pkg; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done < <(sed 's/#.*//' "$list" | awk 'NF { print $1 }')
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
