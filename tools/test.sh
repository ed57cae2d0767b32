#!/usr/bin/env bash
# The test job: installs what is missing of tools/packages.txt (the main
# job's list) and tools/packages-test.txt (PyTorch for the reference
# numerics), builds, and runs the whole suite with ctest, then the sanitizer
# pass (tools/sanitize.sh: the suite again under AddressSanitizer and
# UndefinedBehaviorSanitizer, in build-asan/).
#   tools/test.sh [--no-sanitize]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/deps.sh" "$root/tools/packages.txt" "$root/tools/packages-test.txt"
sanitize=1
[ "${1:-}" = "--no-sanitize" ] && sanitize=0
"$root/tools/build.sh"
status=0
failed=""
rm -f "$root/build/Testing/Temporary/LastTestsFailed.log"
(cd "$root/build" && ctest --output-on-failure -j "$(nproc)" --timeout 1200) || {
  status=$?
  failed="$(cat "$root/build/Testing/Temporary/LastTestsFailed.log" 2>/dev/null || true)"
}
if [ $sanitize = 1 ]; then
  "$root/tools/sanitize.sh" || status=$?
fi
# The failures again, last, where a log's tail shows them, with the CPU
# features that choose kernels.
[ -n "$failed" ] && printf 'failed in the normal pass (number:name):\n%s\n' "$failed" >&2
if [ $status != 0 ]; then
  "$root/build/poseidon" info 2>&1 | grep -E '^(oneDNN ISA|CPU bf16|CPU threads)' >&2 || true
fi
exit $status
