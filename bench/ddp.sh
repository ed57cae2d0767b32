#!/usr/bin/env bash
# The engine's distributed training against PyTorch's DistributedDataParallel
# (gloo) on the emulated cluster (tools/cluster, docs/CLUSTER.md): the same
# model, per-rank batch, synthetic data, SGD settings and threads per rank,
# real computation on both sides, the two run one after the other. Ours is
# `poseidon train` with its default scheme (dist.scheme: hybrid, WFBP);
# PyTorch's is bench/ddp_torch.py, one process per rank under the cluster's
# mpirun. Both time the iterations after the warm-up and report images per
# second over all ranks (global batch x iterations / seconds).
#
# Usage: bench/ddp.sh [--bin POSEIDON] [--models vgg19_22k_32,cifar10_quick] [--hosts 1,2,4]
#                     [--bandwidth 1gbit] [--threads 1] [--momentum 0.9] [--warmup N] [--iters N]
#                     [--rounds 1] [--subnet 10.219.0] [--out DIR] [--python PYTHON] [--run-timeout S]
#                     [--compression none|bf16|lowrank|auto] [--rank R] [--planner-link GBPS,US,GFLOPS]
#                     [--ranks-per-host G]
#   models: vgg19_22k_32 (models/vgg19_22k.yaml at 32x32: all 229M parameters,
#           batch 32), vgg19_22k_32_narrow (the same at half the convolutions'
#           widths and 512 hidden units in the classifier: 22,898,033
#           parameters, 78% in the classifier, all 21,841 classes, batch 32;
#           at most 0.9 GB per rank, so 16 ranks fit where vgg19_22k_32's ~5 GB
#           do not) and cifar10_quick (batch 64), bench/torch_models.py's twins
#   --warmup/--iters: untimed and timed iterations for every model (defaults
#           per model: 2/4 for vgg19_22k_32, 3/10 for vgg19_22k_32_narrow,
#           10/50 for cifar10_quick)
#   --hosts: 1 is the same run on a one-host cluster: each side's speed alone
#           (one rank, whatever --ranks-per-host says)
#   --ranks-per-host: G consecutive ranks on each host of more than one,
#           sharing its one shaped link (tools/cluster's option; ours also
#           gets dist.ranks_per_host = G); images per second count all ranks
#   --compression: gradients compressed on both sides (docs/COMPRESSION.md):
#           bf16: ours dist.wire=bf16, DDP's fp16_compress_hook (the same
#           bytes); lowrank: ours dist.lowrank (the planner picks the layers)
#           at rank R, DDP's powerSGD_hook at rank R (every matrix);
#           auto: ours dist.compression=auto with compression_min_rank R
#           (the planner chooses per layer: PS, SFB, all-reduce, fp32 or bf16
#           on the wire, low-rank at rank R to 8R), DDP's powerSGD_hook at
#           rank R
#   --planner-link: the link figures our planner assumes (dist.bandwidth_gbps,
#           latency_us, gemm_gflops) instead of its start-up probe, which
#           moves with the machine's load and with it the plan
#   --rounds: pairs of runs per setting; the table keeps each side's fastest
#           (other work on the machine only slows a run)
# Writes DIR/results.jsonl (one line per run), DIR/logs/, DIR/table.md
# (default DIR: /tmp/poseidon_ddp). Needs root (tools/cluster), Open MPI and
# Debian's python3-torch (/usr/bin/python3 by default).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${POSEIDON_BUILD_DIR:-$root/build}/poseidon
models=vgg19_22k_32,cifar10_quick
hosts_list=1,2,4
bandwidth=1gbit
threads=1
momentum=0.9
lr=1e-5
warmup_all=""
iters_all=""
rounds=1
subnet=10.219.0
out=/tmp/poseidon_ddp
python=/usr/bin/python3
run_timeout=1200
compression=none
rank=4
planner_link=""
ranks_per_host=1
usage() { sed -n '/^# Usage/,/^# Debian/p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --bin) bin=$(realpath "$2"); shift 2 ;;
    --models) models=$2; shift 2 ;;
    --hosts) hosts_list=$2; shift 2 ;;
    --bandwidth) bandwidth=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --momentum) momentum=$2; shift 2 ;;
    --warmup) warmup_all=$2; shift 2 ;;
    --iters) iters_all=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --subnet) subnet=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --run-timeout) run_timeout=$2; shift 2 ;;
    --compression) compression=$2; shift 2 ;;
    --rank) rank=$2; shift 2 ;;
    --planner-link) planner_link=$2; shift 2 ;;
    --ranks-per-host) ranks_per_host=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "ddp.sh: unknown option $1" >&2; usage ;;
  esac
done
case $compression in
  none) dist_extra="" ddp_hook=none bucket_mb=25 ;;
  bf16) dist_extra=", wire: bf16" ddp_hook=fp16 bucket_mb=25 ;;
  # One DDP bucket for PowerSGD: the hook chains three collectives per bucket
  # (the uncompressed tensors, then P, then Q), and with several buckets
  # gloo's ranks can issue them in different orders (the likely cause:
  # reduced VGG19-22K in 25 MB buckets stopped with gloo's
  # "op.preamble.length <= op.nbytes" on PyTorch 1.13, made no progress on
  # 2.15). One bucket runs its chain in the same order everywhere; what is
  # lost is the overlap of its small transfers with backward, which on cores
  # shared by every rank saves little anyway.
  lowrank) dist_extra=", lowrank: true, lowrank_rank: $rank" ddp_hook=powersgd bucket_mb=100000 ;;
  auto) dist_extra=", compression: auto, compression_min_rank: $rank" ddp_hook=powersgd bucket_mb=100000 ;;
  *) echo "ddp.sh: unknown compression $compression (none, bf16, lowrank, auto)" >&2; exit 2 ;;
esac
[[ $ranks_per_host =~ ^[1-9][0-9]*$ ]] ||
  { echo "ddp.sh: --ranks-per-host must be a positive number, not '$ranks_per_host'" >&2; exit 2; }
if [[ -n $planner_link ]]; then
  IFS=, read -r link_gbps link_us link_gflops <<<"$planner_link"
  dist_extra+=", bandwidth_gbps: $link_gbps, latency_us: $link_us, gemm_gflops: $link_gflops"
fi
[[ -x $bin ]] || { echo "ddp.sh: no engine binary at $bin (build it, or pass --bin)" >&2; exit 2; }
"$python" -c "import torch, torchvision" 2>/dev/null ||
  { echo "ddp.sh: $python cannot import torch and torchvision (apt-get install python3-torch python3-torchvision)" >&2; exit 2; }
mkdir -p "$out/logs"
out=$(realpath "$out")
work=$(mktemp -d /tmp/ddp.XXXX)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads

setup_model() {  # setup_model MODEL -> model_file, classes, shape, batch, warmup, iters, overrides
  case $1 in
    vgg19_22k_32)
      model_file=$root/models/vgg19_22k.yaml classes=21841 batch=32 warmup=2 iters=4
      overrides=(--set net.vars.size=32) ;;
    vgg19_22k_32_narrow)
      model_file=$root/models/vgg19_22k.yaml classes=21841 batch=32 warmup=3 iters=10
      overrides=(--set net.vars.size=32 --set net.vars.width=32 --set net.vars.hidden=512) ;;
    cifar10_quick)
      model_file=$root/models/cifar10_quick.yaml classes=10 batch=64 warmup=10 iters=50
      overrides=() ;;
    *) echo "ddp.sh: unknown model $1 (vgg19_22k_32, vgg19_22k_32_narrow, cifar10_quick)" >&2; exit 2 ;;
  esac
  warmup=${warmup_all:-$warmup} iters=${iters_all:-$iters}
}

# Ranks on each host of a P-host cluster: one alone, else --ranks-per-host.
host_ranks() { if [[ $1 -eq 1 ]]; then echo 1; else echo "$ranks_per_host"; fi; }

gcd() { local a=$1 b=$2 t; while ((b)); do t=$((a % b)); a=$b; b=$t; done; echo "$a"; }

memory_note() {
  echo "load average $(cut -d' ' -f1-3 /proc/loadavg); $(free -g | awk '/^Mem:/ { print $7 }') GiB available"
}

run_ours() {  # run_ours MODEL P ROUND
  local model=$1 p=$2 round=$3 g dir=$work/ours-$1-$2-$3 log status=0 host_dist=""
  g=$(host_ranks "$p")
  log=$out/logs/ours-$1-p$2x$g-r$3.log
  if [[ $g -gt 1 ]]; then host_dist=", ranks_per_host: $g"; fi
  mkdir -p "$dir"
  # A record every gcd(warmup, iters) iterations: one closes the warm-up and
  # one the timed iterations (each record waits for the transfers in flight).
  cat >"$dir/config.yaml" <<EOF
model: $model_file
seed: 1
threads: $threads
data:
  train: {source: synthetic, shape: [3, 32, 32], num_classes: $classes, size: 1000000, batch_size: $batch, workers: 1}
solver: {type: sgd, lr: $lr, momentum: $momentum, weight_decay: 0, lr_policy: fixed, max_iter: $((warmup + iters))}
train: {display: $(gcd "$warmup" "$iters"), output_dir: $dir, final_checkpoint: false}
dist: {scheme: hybrid, wfbp: true$dist_extra$host_dist}
EOF
  echo "== ours $model $p host(s) x $g round $round: $(date +%T), $(memory_note)" >&2
  timeout "$run_timeout" "$root/tools/cluster" --hosts "$p" --ranks-per-host "$g" --bandwidth "$bandwidth" \
    --subnet "$subnet" -- \
    "$bin" train "$dir/config.yaml" "${overrides[@]}" >"$log" 2>&1 || status=$?
  "$python" "$root/bench/ddp.py" engine-row "$dir/metrics.jsonl" "$log" "$model" "$p" "$g" "$batch" "$warmup" \
    "$iters" "$status" >>"$out/results.jsonl"
  rm -rf "$dir"
  tail -1 "$out/results.jsonl" >&2
}

run_ddp() {  # run_ddp MODEL P ROUND
  local model=$1 p=$2 round=$3 g log status=0
  g=$(host_ranks "$p")
  log=$out/logs/ddp-$1-p$2x$g-r$3.log
  echo "== DDP $model $p host(s) x $g round $round: $(date +%T), $(memory_note)" >&2
  timeout "$run_timeout" "$root/tools/cluster" --hosts "$p" --ranks-per-host "$g" --bandwidth "$bandwidth" \
    --subnet "$subnet" -- \
    "$python" "$root/bench/ddp_torch.py" --model "$model" --batch "$batch" --warmup "$warmup" --iters "$iters" \
    --ranks-per-host "$g" \
    --threads "$threads" --lr "$lr" --momentum "$momentum" --master-addr "$subnet.1" \
    --comm-hook "$ddp_hook" --powersgd-rank "$rank" --bucket-mb "$bucket_mb" >"$log" 2>&1 || status=$?
  if ! grep -h '^{"side": "ddp"' "$log" >>"$out/results.jsonl"; then
    printf '{"side": "ddp", "model": "%s", "hosts": %d, "ranks_per_host": %d, "batch": %d, "status": %d, "error": "no result, see %s"}\n' \
      "$model" "$p" "$g" "$batch" "$status" "$log" >>"$out/results.jsonl"
  fi
  tail -1 "$out/results.jsonl" >&2
}

: >"$out/results.jsonl"
IFS=, read -r -a model_names <<<"$models"
IFS=, read -r -a host_counts <<<"$hosts_list"
echo "ddp.sh: $(date), $bandwidth links, $threads thread(s) per rank, SGD momentum $momentum, compression $compression, $ranks_per_host rank(s) per host, $("$python" -c 'import torch; print("torch", torch.__version__)')" >&2
for model in "${model_names[@]}"; do
  setup_model "$model"
  for p in "${host_counts[@]}"; do
    for ((round = 1; round <= rounds; round++)); do
      run_ours "$model" "$p" "$round"
      run_ddp "$model" "$p" "$round"
    done
  done
done
"$python" "$root/bench/ddp.py" table "$out/results.jsonl" | tee "$out/table.md"
