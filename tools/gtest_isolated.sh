#!/usr/bin/env bash
# Runs a GoogleTest binary so that one test that crashes or hangs does not
# hide the others: code running for the first time on a new device can take
# its whole process down. Each test that ends the process (a signal, an
# abort) or outlasts the time limit is named, left out, and the binary runs
# again for the tests it had not reached. Prints one line: passed, failed,
# skipped, and the tests that crashed or hung; where several failed, the
# first ones run again alone, and those that pass alone are named. Exit
# status 0 when every test ran and none failed; 2 when none failed, crashed
# or hung but the deadline left some not run; else 1.
#
# Usage: tools/gtest_isolated.sh BINARY FILTER LOG [SECONDS_PER_RUN] [DEADLINE_EPOCH]
#   FILTER    a --gtest_filter pattern without a negative part
#   LOG       every run's output, one after the other
#   SECONDS_PER_RUN  the longest one run of the binary may take (default 120)
#   DEADLINE_EPOCH   no run starts after this time (date +%s), none outlasts it
set -uo pipefail
binary=$1 filter=$2 log=$3 limit=${4:-120} deadline=${5:-0}
: >"$log"
left_out=() lost=()
out_of_time=false
# Sets run_limit, the longest the next run may take: the limit per run, cut
# to the deadline. Fails where that leaves under 5 seconds.
next_run_limit() {
  run_limit=$limit
  if ((deadline > 0)); then
    local remaining=$((deadline - $(date +%s)))
    ((remaining < run_limit)) && run_limit=$remaining
  fi
  ((run_limit >= 5))
}
while true; do
  if ! next_run_limit; then
    lost+=("(out of time: the rest not run)")
    out_of_time=true
    break
  fi
  negative=""
  ((${#left_out[@]})) && negative="-$(IFS=:; echo "${left_out[*]}")"
  attempt=$(mktemp)
  timeout -k 10 "$run_limit" "$binary" --gtest_filter="$filter$negative" >"$attempt" 2>&1
  status=$?
  cat "$attempt" >>"$log"
  if grep -qE '^\[==========\] [0-9]+ tests? from .* ran\.' "$attempt"; then
    rm -f "$attempt"
    break
  fi
  # The process ended early: every test it started is done with, and the
  # one it did not finish is the culprit.
  mapfile -t started < <(sed -n 's/^\[ RUN      \] \([^ ]*\).*/\1/p' "$attempt")
  rm -f "$attempt"
  if ((${#started[@]} == 0)); then
    lost+=("(the binary ended before any test, status $status)")
    break
  fi
  culprit=${started[-1]}
  if ((status == 124 || status == 137)) && ((run_limit < limit)); then
    # Cut by the deadline, not by its own limit: slow, not known to hang.
    lost+=("$culprit and the rest (out of time after ${run_limit}s)")
    out_of_time=true
    break
  elif ((status == 124 || status == 137)); then
    lost+=("$culprit (hung: over ${run_limit}s)")
  else
    lost+=("$culprit (crashed: status $status)")
  fi
  left_out+=("${started[@]}")
done
# A test's own result line: "[  FAILED  ] Suite.Name[, where GetParam() = ...] (N ms)".
result_lines() { grep -E "^\[ *$1 *\] [A-Za-z0-9_/.]+(, where .*)? \([0-9]+ ms\)\$" "$log"; }
count() { result_lines "$1" | wc -l; }
passed=$(count OK) failed=$(count FAILED) skipped=$(count SKIPPED)
printf '%-14s passed %d, failed %d, skipped %d' "$(basename "$binary")" "$passed" "$failed" "$skipped"
((${#lost[@]})) && printf ', crashed or hung:' && printf ' %s;' "${lost[@]}"
echo
result_lines FAILED | head -30
# A fault on the GPU (an illegal address) is sticky: every later test in
# that process fails with it. Where several failed, the first few run again
# alone while the deadline allows, to tell a test's own failure from that.
if ((failed > 1)); then
  alone=()
  mapfile -t failures < <(result_lines FAILED | sed -E 's/^\[ *FAILED *\] ([^ ,]+).*/\1/' | head -12)
  for name in "${failures[@]}"; do
    next_run_limit || break
    echo "== $name alone" >>"$log"
    timeout -k 10 "$run_limit" "$binary" --gtest_filter="$name" >>"$log" 2>&1 && alone+=("$name")
  done
  ((${#alone[@]})) && printf '  passed when run alone (failed after an earlier failure):%s\n' "$(printf ' %s' "${alone[@]}")"
fi
((failed == 0 && ${#lost[@]} == 0)) && exit 0
# Out of time is the only entry a run can end on without a crash or hang.
((failed == 0 && ${#lost[@]} == 1)) && $out_of_time && exit 2
exit 1
