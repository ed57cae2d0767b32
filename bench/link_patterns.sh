#!/usr/bin/env bash
# How much of the emulated cluster's link rate MPI over TCP reaches in a ring,
# a concurrent all-to-all and pairwise rounds (bench/link_patterns.cpp), each
# rank sending BYTES to each other rank per pattern, rounds alternating the
# three; prints each pattern's median time, the link time of its bytes at the
# TCP payload rate (1448 of 1514 bytes: what bench/scaling.sh gives the
# simulator) and that share, and each against the ring measured in the same
# rounds. Ranks sleep 50 us between tests of their requests, as the
# scheduler does; --spin waits in MPI_Waitall instead (spinning). Needs root
# (tools/cluster) and Open MPI's mpicxx.
#
#   bench/link_patterns.sh [--hosts 8] [--bandwidth-mbit 1000] [--bytes 100000000]
#                          [--rounds 3] [--spin] [--tcp CC] [--subnet A.B.C] [--out DIR]
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
hosts=8
mbit=1000
bytes=100000000
rounds=3
subnet=10.213.0
out=""
spin=()
cluster_args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --hosts) hosts=$2; shift 2 ;;
    --bandwidth-mbit) mbit=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --spin) spin=(spin); shift ;;
    --subnet) subnet=$2; shift 2 ;;
    --tcp) cluster_args+=(--tcp "$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) sed -n '/^#   bench/,/^set/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
work=${out:-$(mktemp -d)}
mkdir -p "$work"
mpicxx -O2 -std=c++17 -o "$work/link_patterns" "$root/bench/link_patterns.cpp"
payload_gbps=$(awk -v m="$mbit" 'BEGIN { printf "%.6g\n", m / 1000 * 1448 / 1514 }')
# The same TCP fragmenting as bench/scaling.sh's training runs.
export OMPI_MCA_btl_tcp_flags=${OMPI_MCA_btl_tcp_flags:-send,inplace,need-ack,need-csum}
"$root/tools/cluster" "${cluster_args[@]}" --hosts "$hosts" --bandwidth "${mbit}mbit" --subnet "$subnet" -- \
  "$work/link_patterns" "$bytes" "$payload_gbps" "$rounds" "${spin[@]}" >"$work/results.jsonl"
python3 - "$work/results.jsonl" "$hosts" "$mbit" "$bytes" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
hosts, mbit, per_peer = sys.argv[2:]
print(f"{hosts} hosts, {mbit} Mbit/s links, {int(per_peer) / 1e6:g} MB to each peer per pattern, {len(rows) // 3} rounds (medians)")
print(f"{'pattern':<12} {'seconds':>8} {'link s':>8} {'of link rate':>13} {'vs ring':>8}")
median = {p: statistics.median(r["seconds"] for r in rows if r["pattern"] == p) for p in ("ring", "all-to-all", "pairwise")}
link = rows[0]["link_seconds"]
for p, s in median.items():
    print(f"{p:<12} {s:8.3f} {link:8.3f} {100 * link / s:12.1f}% {median['ring'] / s:8.2f}")
PY
