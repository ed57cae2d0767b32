#!/usr/bin/env bash
# Training under Slurm as a user of a one-node cluster would run it: a
# private munged, slurmctld and slurmd (Debian's slurm-wlm) on this machine;
# `srun --mpi=pmix -n 2 poseidon train` must train 2 ranks to the same
# weights as `mpirun -np 2`, and `srun --mpi=none -n 2` (Slurm's own default)
# must be refused by every task, naming srun --mpi=pmix, before any work.
# Exits 77 (skipped) where Slurm is not installed or cannot start here.
#   tests/tools/slurm_one_node_test.sh POSEIDON_BINARY
set -euo pipefail
poseidon=$(realpath "$1")
skip() {
  echo "SKIP: $*"
  exit 77
}
for program in munged mungekey slurmctld slurmd srun sinfo squeue mpirun python3; do
  command -v "$program" >/dev/null || skip "$program is not installed (tools/packages-test.txt)"
done
[[ $(id -u) -eq 0 ]] || skip "the daemons run as root here"

work=$(mktemp -d)
pids=()
# Stops a daemon: TERM, then KILL after 10 s.
stop() {
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 20); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.5
  done
  kill -9 "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
# Lets the last job's steps report to slurmctld (through munge), then stops
# the daemons in the reverse order of their start.
cleanup() {
  for _ in $(seq 20); do
    [[ -z $(squeue -h 2>/dev/null) ]] && break
    sleep 0.5
  done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do stop "${pids[i]}"; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for log in "$work"/*.log; do
    echo "== $log"
    tail -n 20 "$log"
  done
  exit 1
}

# Munge with its own key and socket.
mkdir -p "$work/munge" "$work/state" "$work/spool"
chmod 700 "$work/munge"
mungekey --create --keyfile="$work/munge/munge.key" --force >/dev/null 2>&1 || skip "mungekey cannot make a key"
munged --foreground --force --key-file="$work/munge/munge.key" --socket="$work/munge/munge.socket" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/munged.log" --seed-file="$work/munge/seed" >/dev/null 2>&1 &
pids+=($!)

node=$(hostname -s)
port=$((20000 + RANDOM % 20000))
cat >"$work/slurm.conf" <<EOF
ClusterName=poseidon
SlurmctldHost=$node
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
NodeName=$node CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
export SLURM_CONF=$work/slurm.conf
sleep 1
slurmctld -D -i >/dev/null 2>&1 &
pids+=($!)
slurmd -D -N "$node" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 60); do
  sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)' && break
  sleep 0.5
done
sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)' || skip "Slurm did not start here: $(tail -n 3 "$work/slurmctld.log" "$work/slurmd.log" 2>/dev/null | tr '\n' ' ')"

cat >"$work/model.yaml" <<'EOF'
name: tiny
inputs: {data: [6], label: []}
layers:
  - {name: fc1, type: fc, num_output: 5}
  - {name: fc2, type: fc, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc2, label]}
EOF
cat >"$work/config.yaml" <<'EOF'
model: model.yaml
threads: 1
data:
  train: {source: synthetic, shape: [6], num_classes: 3, size: 64, batch_size: 4}
  test: {source: synthetic, shape: [6], num_classes: 3, size: 32, batch_size: 8, seed: 2}
solver: {lr: 0.1, momentum: 0.9, max_iter: 8}
train: {display: 0}
dist: {scheme: allreduce}
EOF

timeout 120 srun --mpi=pmix -n 2 -t 2 "$poseidon" train "$work/config.yaml" --quiet \
  --set train.output_dir="$work/srun" >"$work/srun_pmix.log" 2>&1 || fail "srun --mpi=pmix -n 2 failed"
timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$poseidon" train "$work/config.yaml" --quiet \
  --set train.output_dir="$work/mpirun" >"$work/mpirun.log" 2>&1 || fail "mpirun -np 2 failed"
grep -q '"world_size": *"2"' <(python3 -c '
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    print(json.dumps(json.loads(f.read(n))["__metadata__"]))' "$work/srun/final.safetensors") ||
  fail "the srun run's checkpoint is not of 2 ranks"
"$poseidon" test "$work/config.yaml" --json --weights "$work/srun/final.safetensors" >"$work/srun_test.json"
"$poseidon" test "$work/config.yaml" --json --weights "$work/mpirun/final.safetensors" >"$work/mpirun_test.json"
cmp -s "$work/srun_test.json" "$work/mpirun_test.json" ||
  fail "srun's weights evaluate differently from mpirun's: $(cat "$work/srun_test.json" "$work/mpirun_test.json")"

status=0
timeout 120 srun --mpi=none -n 2 -t 2 "$poseidon" train "$work/config.yaml" --quiet \
  --set train.output_dir="$work/none" >"$work/srun_none.log" 2>&1 || status=$?
[[ $status -ne 0 ]] || fail "srun --mpi=none -n 2 trained"
[[ $(grep -c 'srun --mpi=pmix' "$work/srun_none.log") -eq 2 ]] || fail "not both tasks named srun --mpi=pmix"
[[ ! -e "$work/none" ]] || fail "srun --mpi=none made the output directory: work had started"
echo "PASS: srun --mpi=pmix trains 2 ranks as mpirun does; srun --mpi=none is refused by both tasks"
