#!/usr/bin/env bash
# The sanitizer pass: builds the whole suite with AddressSanitizer (leaks
# included) and UndefinedBehaviorSanitizer into build-asan/ (or
# $ASAN_BUILD_DIR) and runs it with ctest. Any report aborts the process that
# made it, so its test fails; reports are also collected in
# build-asan/sanitizer-reports/, which must be empty at the end.
# Left out for time, because the normal pass runs them: the tests that run
# PyTorch, those that train the benchmark models (at a reduced size),
# and the replica tests on 1, 3 and 4 ranks, whose code the 2-rank run covers;
# and the fuzz corpus replays, which tools/fuzz.sh runs sanitized, and whose
# budget's refused allocations print ASan warnings that would count as
# reports (SLOW below; tests/sanitize/README.md). Tests that start MPI run in a
# second ctest pass with the settings Open MPI needs under LeakSanitizer.
# Arguments are passed to both ctest passes (e.g. -R Net).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${ASAN_BUILD_DIR:-$root/build-asan}"
# Host code only: the normal pass builds the CUDA backend, and the
# sanitizers do not see into device code.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPOSEIDON_SANITIZE=ON -DPOSEIDON_CUDA=OFF >/dev/null
cmake --build "$build" -j "$(nproc)"

SLOW='^TorchReference\.|/Torchvision[A-Za-z]*\.|/ImportTorch(RoundTrip|Refuses)\.|AgreesWithTorchvision|/ModelConfigs\.|^dist\.np[134]$|^fuzz_replay\.'
reports="$build/sanitizer-reports"
rm -rf "$reports"
mkdir -p "$reports"
cd "$build"

# Test numbers for ctest -I: "mpi" for tests that start MPI (mpiexec, a
# dist test binary, or a test labelled mpi), "plain" for the others, neither
# for the SLOW ones. Given -R or -E, ctest numbers the tests they leave, so
# the list does too.
numbers() {
  local kind="$1"
  shift
  ctest --show-only=json-v1 "$@" | SLOW="$SLOW" python3 -c '
import json, os, re, sys
kind, slow, picked = sys.argv[1], re.compile(os.environ["SLOW"]), []
for number, test in enumerate(json.load(sys.stdin)["tests"], 1):
    command = test.get("command", [])
    labels = next((p["value"] for p in test.get("properties", []) if p["name"] == "LABELS"), [])
    mpi = (any("mpiexec" in c for c in command) or any(os.path.basename(c).startswith("dist_") for c in command[:1])
           or "mpi" in labels)
    if not slow.search(test["name"]) and mpi == (kind == "mpi"):
        picked.append(str(number))
print(",".join(picked))' "$kind"
}

export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:log_path=$reports/asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$reports/ubsan"
status=0
failed=""
# One ctest pass over the given test numbers; its failures are kept, as the
# next pass would replace ctest's list of them.
run_pass() {
  local numbers="$1"
  shift
  [ -n "$numbers" ] || return 0
  rm -f Testing/Temporary/LastTestsFailed.log
  ctest --output-on-failure -j "$(nproc)" --timeout 1200 -I "0,0,0,$numbers" "$@" || {
    status=$?
    failed+="$(cat Testing/Temporary/LastTestsFailed.log 2>/dev/null || true)"$'\n'
  }
}
run_pass "$(numbers plain "$@")" "$@"

# Open MPI keeps memory from MPI_Init until exit (tests/sanitize/lsan.supp
# names the libraries); matching them needs full stacks, so malloc unwinds
# slowly here. LeakSanitizer's walk over dynamic TLS crashes on the blocks of
# Open MPI's unloaded components unless __tls_get_addr is left alone.
ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0:intercept_tls_get_addr=0" \
  LSAN_OPTIONS="suppressions=$root/tests/sanitize/lsan.supp:print_suppressions=0" \
  run_pass "$(numbers mpi "$@")" "$@"

if compgen -G "$reports/*" >/dev/null; then
  echo "sanitizer reports:" >&2
  for f in "$reports"/*; do
    echo "==== $f" >&2
    cat "$f" >&2
  done
  status=1
fi
[ -n "$failed" ] && printf 'failed under the sanitizers (number:name):\n%s' "$failed" >&2
exit $status
