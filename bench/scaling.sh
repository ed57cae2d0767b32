#!/usr/bin/env bash
# Speed-ups of the real training binary on an emulated cluster (tools/cluster:
# one network namespace per host, tc-shaped links) with emulated compute
# (--emulate-compute: each layer waits its profiled time), beside what
# `poseidon simulate` predicts for the same settings.
#
# The cluster is a scaled 10 GbE one: compute slowed F times (--scale) and
# links at 10/F Gbit/s, so the ratio of compute to communication is that of
# the profiled GPU on 10 GbE while this machine's two cores keep up. The
# models run at a reduced input (VGG19-22K at 32x32, through its adaptive
# pool: the same 229,052,817 parameters and FC shapes; Inception-V3 at 75x75
# without the auxiliary head, whose entries leave its profile) so that eight
# ranks fit in memory; the profile gives each layer's time at the full input
# by layer name. speed-up = P x t1 / tP, t1 the one-rank iteration.
# vgg19_22k_narrow is VGG19-22K at half the convolutions' widths and 512
# hidden units (22,898,033 parameters), whose 16 ranks fit where the full
# model's do not; its profile is the full one's scaled by each layer's FLOP
# ratio (bench/flop_ratio_profile.py).
#
# Usage: bench/scaling.sh [--bin build/poseidon] [--models vgg19_22k,inception_v3] (or vgg19_22k_narrow)
#          [--hosts 1,2,4,8] [--schemes ps-nowfbp,ps,hybrid,allreduce] [--scale 10]
#          [--iters M] [--latency-us 20] [--out DIR (/tmp/poseidon_scaling)] [--append]
#          [--run-timeout S] [--set KEY=VALUE]... [--subnet A.B.C] [--queue-ms MS] [--tcp CC]
#          [--ranks-per-host G] [--resimulate]
#   schemes: ps-nowfbp (PS, WFBP off), ps, hybrid, allreduce, sfb (FC layers by
#   SFB, the rest by PS: HybComm's byte rule without the planner's GEMM probe)
# Each run trains 2M iterations and times the last M (default 2). Results go
# to DIR/results.jsonl (one line per run, with the machine's CPU busy share
# during the timed iterations), DIR/table.md and DIR/scaling.png
# (bench/scaling.py); --append adds to an earlier results.jsonl (runs done in
# parts); --run-timeout S (default 600) ends a run that hangs; --set KEY=VALUE
# overrides a config key in every run (e.g. solver.momentum=0); --subnet
# gives tools/cluster the hosts' /24 (another cluster may be using the
# default); --queue-ms each link's queue in milliseconds (tools/cluster's,
# default 8); --tcp the hosts' TCP congestion control (tools/cluster's);
# --ranks-per-host G puts G consecutive ranks on each host, sharing its link
# (P = hosts x G ranks; dist.ranks_per_host = G for training and simulator);
# --resimulate trains nothing and refreshes the simulator's
# columns of DIR/results.jsonl for --models (after a change to the
# simulator). Needs root (tools/cluster).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Its Python (bench/scaling.py) runs on Debian's python3, whose
# python3-matplotlib draws the plot, whatever virtual environment is active.
scaling_py=(/usr/bin/python3 "$root/bench/scaling.py")
bin=$root/build/poseidon
models=vgg19_22k,inception_v3
hosts_list=1,2,4,8
schemes=ps-nowfbp,ps,hybrid,allreduce
scale=10
iters=2
latency_us=20
out=/tmp/poseidon_scaling
append=false
resimulate=false
ranks_per_host=1
run_timeout=600
extra=()
cluster_args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --bin) bin=$(realpath "$2"); shift 2 ;;
    --models) models=$2; shift 2 ;;
    --hosts) hosts_list=$2; shift 2 ;;
    --schemes) schemes=$2; shift 2 ;;
    --scale) scale=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --latency-us) latency_us=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --append) append=true; shift ;;
    --resimulate) resimulate=true; shift ;;
    --run-timeout) run_timeout=$2; shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    --subnet) cluster_args+=(--subnet "$2"); shift 2 ;;
    --queue-ms) cluster_args+=(--queue-ms "$2"); shift 2 ;;
    --tcp) cluster_args+=(--tcp "$2"); shift 2 ;;
    --ranks-per-host) ranks_per_host=$2; shift 2 ;;
    *) echo "scaling.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [[ $ranks_per_host -gt 1 ]]; then
  cluster_args+=(--ranks-per-host "$ranks_per_host")
  extra+=(--set dist.ranks_per_host="$ranks_per_host")
fi
mkdir -p "$out"
out=$(realpath "$out")
# Open MPI's TCP transport sends a message whose receive is already posted
# (PS pulls) by its put protocol, as one fragment during which the connection
# carries nothing the other way: at P = 2 that halves the link. Without put,
# long messages go in 128 KiB fragments both ways at once.
export OMPI_MCA_btl_tcp_flags=${OMPI_MCA_btl_tcp_flags:-send,inplace,need-ack,need-csum}
work=$(mktemp -d /tmp/scaling.XXXX)
trap 'rm -rf "$work"' EXIT
gbps=$(awk -v f="$scale" 'BEGIN { printf "%.6g\n", 10 / f }')
mbit=$(awk -v f="$scale" 'BEGIN { printf "%.0f\n", 10000 / f }')
# What the links carry as payload: a full TCP segment over Ethernet at MTU
# 1500 (timestamps on) is 1448 bytes of data in 1514 on the wire, which tbf
# counts. The simulator's links move payload, so they get this rate.
payload_gbps=$(awk -v g="$gbps" 'BEGIN { printf "%.6g\n", g * 1448 / 1514 }')

# The model's config, reduced input and profile; writes the profile to use.
setup_model() {  # setup_model MODEL -> sets config, profile, overrides
  case $1 in
    vgg19_22k)
      config=$root/configs/vgg19_22k_synthetic.yaml
      profile=$root/profiles/vgg19_22k_b32.json
      overrides=(--set net.vars.size=32 --set "data.train.shape=[3, 32, 32]" "${extra[@]}") ;;
    vgg19_22k_narrow)  # bench/ddp.sh's vgg19_22k_32_narrow; its profile derived by FLOPs
      config=$root/configs/vgg19_22k_synthetic.yaml
      local narrow=(--set net.vars.width=32 --set net.vars.hidden=512)
      profile=$work/vgg19_22k_narrow_b32.json
      "${scaling_py[0]}" "$root/bench/flop_ratio_profile.py" "$root/profiles/vgg19_22k_b32.json" "$config" "$profile" \
        --poseidon "$bin" "${narrow[@]}" >&2
      overrides=(--set net.vars.size=32 "${narrow[@]}" --set "data.train.shape=[3, 32, 32]" "${extra[@]}") ;;
    inception_v3)
      config=$root/configs/inception_v3_synthetic.yaml
      profile=$work/inception_v3_b32_noaux.json
      "${scaling_py[@]}" strip-aux "$root/profiles/inception_v3_b32.json" "$profile"
      overrides=(--set net.vars.size=75 --set net.vars.aux=false --set "data.train.shape=[3, 75, 75]" "${extra[@]}") ;;
    *) echo "scaling.sh: unknown model $1" >&2; exit 2 ;;
  esac
}

# The simulator's prediction for P hosts and one scheme, as JSON into OUT.
simulate_one() {  # simulate_one P SCHEME OUT
  local p=$1 wfbp=true dist_scheme=$2
  if [[ $2 == ps-nowfbp ]]; then wfbp=false; dist_scheme=ps; fi
  "$bin" simulate "$config" "${overrides[@]}" --profile "$scaled_profile" --workers "$p" --bandwidth "$payload_gbps" \
    --latency "$latency_us" --scheme "$dist_scheme" --wfbp $wfbp --json >"$3"
}

# Replaces the simulator's columns of MODEL's rows in results.jsonl.
resimulate_model() {  # resimulate_model MODEL
  local p scheme
  "${scaling_py[@]}" resimulate-runs "$out/results.jsonl" "$1" |
    while read -r p scheme; do simulate_one "$p" "$scheme" "$work/sim-$p-$scheme.json"; done
  "${scaling_py[@]}" resimulate "$out/results.jsonl" "$1" "$work" "$payload_gbps"
}

# The machine's CPU counters (the first line of /proc/stat) every half
# second into FILE: the emulated hosts' TCP stacks and MPI progress share
# this machine's cores, a cost the simulator's separate hosts do not have.
sample_cpu() {  # sample_cpu FILE
  while :; do
    echo "$(date +%s.%N) $(head -1 /proc/stat)" >>"$1"
    sleep 0.5
  done
}

# One run: P hosts, one scheme; appends a line to results.jsonl.
run_one() {  # run_one MODEL P SCHEME
  local model=$1 p=$2 scheme=$3 wfbp=true dist_scheme=$3 ranks=$(($2 * ranks_per_host))
  if [[ $scheme == ps-nowfbp ]]; then wfbp=false; dist_scheme=ps; fi
  if [[ $scheme == single ]]; then dist_scheme=hybrid ranks=1; fi  # one rank: no communication
  local run_dir=$work/$model-$p-$scheme log=$out/logs/$model-p$p-$scheme.log
  mkdir -p "$out/logs"
  rm -rf "$run_dir"
  local train=("$bin" train "$config" "${overrides[@]}" --emulate-compute "$profile" --emulate-scale "$scale"
    --set threads=1 --set solver.max_iter=$((2 * iters)) --set train.display="$iters"
    --set train.output_dir="$run_dir" --set dist.scheme="$dist_scheme" --set dist.wfbp=$wfbp
    --set dist.bandwidth_gbps="$gbps" --set dist.latency_us="$latency_us")
  echo "== $model P=$p $scheme: $(date +%T)" >&2
  local start=$SECONDS status=0 cpu_log=$work/cpu-$model-$p-$scheme.txt sampler
  rm -f "$cpu_log"
  sample_cpu "$cpu_log" &
  sampler=$!
  if [[ $p -eq 1 ]]; then
    "${train[@]}" >"$log" 2>&1 || status=$?
  else
    timeout "$run_timeout" "$root/tools/cluster" "${cluster_args[@]}" --hosts "$p" --bandwidth "${mbit}mbit" -- "${train[@]}" >"$log" 2>&1 || status=$?
  fi
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  local sim_json=$work/sim.json
  if [[ $status -eq 0 && $p -gt 1 ]]; then
    simulate_one "$ranks" "$scheme" "$sim_json"
  else
    echo '{}' >"$sim_json"
  fi
  "${scaling_py[@]}" row "$run_dir/metrics.jsonl" "$sim_json" --model "$model" --workers "$ranks" --scheme "$scheme" \
    --scale "$scale" --bandwidth-gbps "$gbps" --payload-gbps "$payload_gbps" --status "$status" \
    --wall-s "$((SECONDS - start))" --iters "$iters" --cpu-log "$cpu_log" >>"$out/results.jsonl"
  tail -1 "$out/results.jsonl" >&2
}

$append || $resimulate || : >"$out/results.jsonl"
IFS=, read -r -a model_names <<<"$models"
IFS=, read -r -a host_counts <<<"$hosts_list"
IFS=, read -r -a scheme_names <<<"$schemes"
for model in "${model_names[@]}"; do
  setup_model "$model"
  # The simulator's profile: the same times, slowed F times.
  scaled_profile=$work/$model-scaled.json
  "${scaling_py[@]}" scale-profile "$profile" "$scaled_profile" "$scale"
  if $resimulate; then
    resimulate_model "$model"
    continue
  fi
  for p in "${host_counts[@]}"; do
    if [[ $p -eq 1 ]]; then
      run_one "$model" 1 single
      continue
    fi
    for scheme in "${scheme_names[@]}"; do run_one "$model" "$p" "$scheme"; done
  done
done
"${scaling_py[@]}" table "$out/results.jsonl" --table "$out/table.md" --plot "$out/scaling.png"
cat "$out/table.md"
