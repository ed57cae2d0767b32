#!/usr/bin/env bash
# Proves the README's main command on a fresh machine: a minimal Debian 12
# root (debootstrap --variant=minbase bookworm) gets a clean clone of this
# repository's committed HEAD and runs `tools/run.sh` in it as root, which
# must install every package it needs, build and train. Passes when run.sh
# exits 0 and its metrics.jsonl holds train records and a test record. Needs root (chroot, mount) and the network (apt).
#
# Usage: tools/fresh_machine_check.sh [--root-tar TAR] [--dir DIR] [--keep]
#          [--mirror URL] [-- RUN_ARGS...]
#   --root-tar TAR  unpack this minbase root instead of running debootstrap
#   --dir DIR       where the root goes (default: a new folder under /var/tmp);
#                   it must not exist or be empty
#   --keep          leave the root in place afterwards (it is removed otherwise)
#   --mirror URL    debootstrap's mirror (default http://deb.debian.org/debian)
#   RUN_ARGS        passed to tools/run.sh (default: --set solver.max_iter=300)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
root_tar=""
dir=""
keep=false
mirror=http://deb.debian.org/debian
run_args=(--set solver.max_iter=300)
while [[ $# -gt 0 ]]; do
  case $1 in
    --root-tar) root_tar=$(realpath "$2"); shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --keep) keep=true; shift ;;
    --mirror) mirror=$2; shift 2 ;;
    --) shift; run_args=("$@"); break ;;
    *) echo "fresh_machine_check.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
script=fresh_machine_check.sh
# shellcheck source=tools/debian_root.sh
source "$repo/tools/debian_root.sh"
debian_root_needs_root
debian_root_folder fresh
head=$(git -C "$repo" rev-parse HEAD)
git -C "$repo" diff --quiet HEAD || echo "note: uncommitted changes are not part of the check (it clones $head)"

echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC'): fresh machine check of $head in $dir"
start=$SECONDS
elapsed() { printf '%dm%02ds' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }
debian_root_make

# A clean clone of the committed HEAD: no build folder, nothing untracked.
# git is not in a minbase root, so the clone is made from outside.
clone=$dir/root/poseidon
git clone -q --no-local "$repo" "$clone"
git -C "$clone" checkout -q --detach "$head"
echo "== $(elapsed): clone of $head; tools/run.sh ${run_args[*]} as root in the fresh root"

status=0
chroot "$dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  /bin/bash -c 'cd /root/poseidon && tools/run.sh "$@"' run.sh "${run_args[@]}" || status=$?
echo "== $(elapsed): tools/run.sh exited with status $status"

# The run's own record: train records up to the last iteration, and a test.
metrics=$(find "$clone/runs" -name metrics.jsonl 2>/dev/null | head -1)
ok=false
if [[ $status -eq 0 && -n $metrics ]]; then
  last_train=$(grep '"type":"train"' "$metrics" | tail -1 | grep -o '"iter":[0-9]*' | cut -d: -f2)
  test_line=$(grep '"type":"test"' "$metrics" | tail -1)
  echo "metrics: ${metrics#"$dir"}: $(grep -c '"type":"train"' "$metrics") train records, the last at iteration ${last_train:-none}"
  echo "last test record: ${test_line:-none}"
  [[ -n $last_train && -n $test_line ]] && ok=true
fi
if $ok; then
  echo "fresh machine check: PASS in $(elapsed) (commit $head)"
else
  echo "fresh machine check: FAIL in $(elapsed) (commit $head)"
  exit 1
fi
