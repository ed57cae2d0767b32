#!/usr/bin/env bash
# A host lost mid-run, on the emulated cluster (tools/cluster): 4 hosts train
# LeNet under tools/elastic_train, one host's rank is killed (SIGKILL) once
# training passes an iteration, the launcher restarts on the 3 hosts left from
# the newest checkpoint, and the job finishes. Then the same checkpoint is
# resumed by hand on a cluster of 3 hosts, and the two final checkpoints are
# compared tensor by tensor, bit for bit. Prints the time lost: from the kill
# to the first training record after the restart.
#
# Usage: bench/lost_host.sh [--bin build/poseidon] [--kill-at ITER (25)] [--out DIR (/tmp/poseidon_lost_host)]
#                           [--subnet A.B.C (10.219.0)]
# Needs root (tools/cluster).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/poseidon
kill_at=25
out=/tmp/poseidon_lost_host
subnet=10.219.0
while [[ $# -gt 0 ]]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --kill-at) kill_at=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --subnet) subnet=$2; shift 2 ;;
    *) echo "lost_host: unknown option $1" >&2; exit 2 ;;
  esac
done
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
rm -rf "$out"
mkdir -p "$out"
cat >"$out/config.yaml" <<YAML
model: $root/models/lenet.yaml
seed: 4
threads: 1
data: {train: {source: synthetic, shape: [1, 28, 28], num_classes: 10, size: 6400, batch_size: 32}}
solver: {lr: 0.02, momentum: 0.9, weight_decay: 0.0005, max_iter: 60}
train: {display: 1, snapshot_interval: 10}
dist: {scheme: hybrid}
YAML
mpi=(--mpi-arg --mca --mpi-arg plm_rsh_agent --mpi-arg "$root/tools/cluster_agent"
     --mpi-arg --mca --mpi-arg plm_rsh_no_tree_spawn --mpi-arg 1
     --mpi-arg --mca --mpi-arg btl --mpi-arg tcp,self
     --mpi-arg --mca --mpi-arg btl_tcp_if_include --mpi-arg "$subnet.0/24"
     --mpi-arg --mca --mpi-arg oob_tcp_if_include --mpi-arg "$subnet.0/24")

# The killer: once the metrics pass --kill-at, SIGKILL the rank in the 4th host's namespace.
(
  for _ in $(seq 1200); do
    last=$(grep -o '"iter":[0-9]*' "$out/elastic/metrics.jsonl" 2>/dev/null | tail -1 | cut -d: -f2 || true)
    if [[ -n $last && $last -ge $kill_at ]]; then
      ns=$(ip netns list | awk '$1 ~ /^pz[0-9]+n3$/ { print $1 }' | head -1 || true)
      for pid in $(ip netns pids "$ns" 2>/dev/null || true); do
        if [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == "$bin" ]]; then
          date -u +%s.%N >"$out/killed_at"
          kill -KILL "$pid"
          echo "lost_host: killed rank pid $pid in $ns after iteration $last" >&2
          exit 0
        fi
      done
    fi
    sleep 0.1
  done
) &
killer=$!

start=$(date -u +%s)
"$root/tools/cluster" --hosts 4 --bandwidth 1gbit --subnet "$subnet" --no-mpirun -- \
  "$root/tools/elastic_train" --hosts "$subnet.1,$subnet.2,$subnet.3,$subnet.4" --output-dir "$out/elastic" \
  --bin "$bin" "${mpi[@]}" -- "$out/config.yaml" --quiet 2>&1 | tee "$out/elastic.log" | grep -E "^(elastic|lost_host|cluster):" >&2
wait "$killer" || true
resumed_from=$(sed -n 's/^elastic: restart 1 of [0-9]* on [0-9]* hosts from \(.*\)$/\1/p' "$out/elastic.log")
[[ -n $resumed_from ]] || { echo "lost_host: the launcher did not restart (see $out/elastic.log)" >&2; exit 1; }
# Kept: the by-hand run starts from the very file the launcher resumed from.
cp "$resumed_from" "$out/resumed_from.safetensors"

"$root/tools/cluster" --hosts 3 --bandwidth 1gbit --subnet "$subnet" -- \
  "$bin" train "$out/config.yaml" --quiet --set train.output_dir="$out/by_hand" \
  --resume "$out/resumed_from.safetensors" >"$out/by_hand.log" 2>&1 || true

python3 - "$out" <<'PY'
import json, struct, sys
out = sys.argv[1]
def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        body = f.read()
    header.pop("__metadata__", None)
    return {k: body[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items()}
a = tensors(f"{out}/elastic/final.safetensors")
b = tensors(f"{out}/by_hand/final.safetensors")
differ = sorted(k for k in a if a[k] != b.get(k))
same = a.keys() == b.keys() and not differ
print(f"final checkpoints: {len(a)} tensors, {'bitwise identical' if same else 'DIFFERENT: ' + ', '.join(differ)}")
killed = float(open(f"{out}/killed_at").read())
records = [json.loads(l) for l in open(f"{out}/elastic/metrics.jsonl")]
after = [r for r in records if r.get("type") == "train" and r.get("unix_time", 0) > killed]
if after:
    print(f"time lost: {after[0]['unix_time'] - killed:.1f} s from the kill to the first iteration after the restart "
          f"(iteration {after[0]['iter']})")
sys.exit(0 if same else 1)
PY
