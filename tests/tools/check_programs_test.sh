#!/usr/bin/env bash
# tools/check_packages.py --scripts must catch a program that no listed
# package installs: a script that runs git, checked against
# tools/packages.txt (which lacks git), must fail naming git and the line.
#   tests/tools/check_programs_test.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '#!/usr/bin/env bash\nset -e\ncommit=$(git rev-parse HEAD)  # git: not in the list\nls "$commit"\n' >"$work/uses_git.sh"
status=0
python3 "$root/tools/check_packages.py" --list "$root/tools/packages.txt" --scripts "$work/uses_git.sh" \
  >"$work/out.txt" || status=$?
cat "$work/out.txt"
if [[ $status -ne 1 ]]; then
  echo "FAIL: the check exited with status $status on a script running git (expected 1)"
  exit 1
fi
if ! grep -q "^MISSING package git: provides /usr/bin/git, run by $work/uses_git.sh:3\$" "$work/out.txt"; then
  echo "FAIL: the check did not name git, the program's file and the script's line"
  exit 1
fi
echo "PASS: a script running a program of no listed package fails, naming it"
