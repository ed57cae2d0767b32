#!/usr/bin/env bash
# Installs the Debian packages that are missing, named by lists (run.sh and
# test.sh share tools/packages.txt) or one by one. An argument with a '/' is
# a list: one package a line, '#' starts a comment. Uses sudo when not root.
#   tools/deps.sh LIST|PACKAGE...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: tools/deps.sh LIST|PACKAGE..." >&2; exit 2; }
wanted=()
for arg in "$@"; do
  if [[ $arg == */* ]]; then
    while read -r pkg; do wanted+=("$pkg"); done < <(sed 's/#.*//' "$arg" | awk 'NF { print $1 }')
  else
    wanted+=("$arg")
  fi
done
missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
