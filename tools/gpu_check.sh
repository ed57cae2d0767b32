#!/usr/bin/env bash
# The GPU check in one go, for a machine with an NVIDIA GPU (H100/H200): runs
# the GPU tests (every layer's forward and backward against its CPU version,
# the allocator, the staging streams, the GEMM, NCCL, a bucket averaged and
# updated on the GPU against the host (dist_tests' CudaDeviceExchange.*, two
# ranks' part where there are two GPUs); no GPU where one is
# expected is a failure, not a skip; precision bf16's layers against the
# CPU's and a bf16 training step against float32; the layers on bfloat16
# blobs against the CPU's (the moving layers bit for bit) and a bf16 net's
# blob types, casts and step against the CPU net's; the bias gradients'
# channel sums and the bias epilogue bit for bit against their CPU
# references, conv and fc with fused bias and ReLU against the CPU and
# repeating bit for bit; nets whose blobs fan out
# into ReLU, pooling and dropout against the CPU; dropout's device-drawn mask
# bit for bit against the CPU's; the first non-finite layer output named as on
# the CPU; the step's finite guard, its flag and the updates that read it
# against the host's; training that reads each iteration late reporting,
# saving and stopping on a non-finite loss as reading at once does; input
# batches through pinned double buffers, and a steady-state iteration counted
# to make no host wait and no GPU memory request; training resumed from a
# checkpoint bit for bit equal to training straight through, in float32 and
# bf16; the training step captured as a CUDA graph and replayed bit for bit
# equal to plain steps, in float32 and bf16, and a capture made to fail
# falling back to plain steps (core_tests' CudaGraphedStep.* and
# CudaStepGraph.*, tools_tests' CudaGraphRun.*)), times vgg19, vgg19_22k and
# inception_v3 training steps at batch 32 on the GPU beside PyTorch's on the
# same GPU (when python3 has torch with CUDA), in float32 with TF32 off on
# both sides (ours with cuDNN's deterministic backward algorithms, then with
# its fastest), then TF32 on on both sides, then in bf16 mixed precision
# (PyTorch's bfloat16 autocast), trains two ranks on the one GPU, traces one distributed
# iteration (the gradients' copies to the host against backward), runs a
# short training of a net with batch norm, residual sums and dropout under
# compute-sanitizer's racecheck and synccheck (float32 and bf16), writes the
# models' profiles for `poseidon simulate` (profiles/<model>_h200_b32.json
# on an H200, else named after the GPU, and <model>_h200_bf16_b32.json from
# the bf16 timings), times PyTorch again under torch.compile with
# channels-last input and weights (the faster setting beyond its defaults,
# reported beside the table as the next target) while time remains, with
# PyTorch's eager bf16 step in channels-last before it (what the layout
# alone gives), and
# prints a short table.
#
# The binaries come from a build here (the Debian packages that
# tools/test.sh installs must be present), or from the GPU kit
# (tools/gpu_kit.sh) on a machine without them: --kit FILE unpacks it
# (tools/gpu_kit_unpack.sh) and builds nothing. Everything it writes besides
# the profiles goes under OUT (default build-gpu/check).
#
# Every step runs under a time limit, and a test that crashes or hangs is
# named and left out while the others run (tools/gtest_isolated.sh): on a
# first run on a new GPU one fault must not hide the rest. --minutes bounds
# the whole check (default 8); a step that no longer fits is reported as not
# run. --only runs the steps named (tests, timing, ranks, sanitizer,
# compiled), for a second call that finishes what a first one's time did
# not reach; the others are reported as not asked.
#
# Usage: tools/gpu_check.sh [--kit FILE | --build DIR] [--out DIR] [--iters N] [--skip-torch] [--minutes M]
#                           [--only STEP,...]
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-gpu"
kit=""
out=""
iters=20
torch=true
minutes=8
only=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --kit) kit=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --skip-torch) torch=false; shift ;;
    --minutes) minutes=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "gpu_check: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
readonly STEPS=(tests timing ranks sanitizer compiled)
for asked in ${only//,/ }; do
  if [[ " ${STEPS[*]} " != *" $asked "* ]]; then
    echo "gpu_check: --only: unknown step '$asked' (the steps: ${STEPS[*]})" >&2
    exit 2
  fi
done
# Whether the step is to run: every step without --only.
wants() { [[ -z $only || ",$only," == *",$1,"* ]]; }
out=${out:-$build/check}
mkdir -p "$out"
out="$(cd "$out" && pwd)"
start=$(date +%s)
deadline=$((start + minutes * 60))
step() { printf '\n== %s (%ds)\n' "$*" $(($(date +%s) - start)); }
# Runs a command for at most SECONDS, and never past the deadline; a command
# that would get under 5 seconds is not started (status 125).
limited() {
  local seconds=$1 remaining=$((deadline - $(date +%s)))
  shift
  ((remaining < seconds)) && seconds=$remaining
  if ((seconds < 5)); then
    echo "gpu_check: out of time, not run: $*" >&2
    return 125
  fi
  timeout -k 10 "$seconds" "$@"
}
cd "$root" || exit 1
# A GPU test that cannot reach the GPU fails rather than skips (tests/gpu_required.h).
export POSEIDON_REQUIRE_GPU=1

if [[ -n $kit ]]; then
  step "unpack the kit"
  # PyTorch runs with the machine's own libraries, not the kit's (its
  # libstdc++ may be older than the one PyTorch was built against).
  system_libraries=${LD_LIBRARY_PATH-}
  # shellcheck source=tools/gpu_kit_unpack.sh
  source "$root/tools/gpu_kit_unpack.sh" "$kit" || { echo "gpu_check: the kit cannot run here" >&2; exit 1; }
  bin=$POSEIDON_KIT/bin
  tests=$POSEIDON_KIT/bin
else
  step "build (POSEIDON_CUDA=ON)"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPOSEIDON_CUDA=ON >"$out/cmake.log" 2>&1 &&
    cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1
  if [[ $? -ne 0 ]]; then
    tail -40 "$out/build.log" "$out/cmake.log"
    echo "gpu_check: the build failed" >&2
    exit 1
  fi
  bin=$build
  tests=$build/tests
fi
# A wedged driver must not take the whole check: every call is bounded.
timeout -k 5 60 "$bin/poseidon" info | tee "$out/info.txt"
gpu_name=$(timeout -k 5 30 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case $gpu_name in
  *H200*) gpu_tag=h200 ;;
  *H100*) gpu_tag=h100 ;;
  "") gpu_tag=gpu ;;
  *) gpu_tag=$(echo "$gpu_name" | tr 'A-Z' 'a-z' | tr -c 'a-z0-9\n' '_' | sed 's/^nvidia_//') ;;
esac

# Test binary and gtest filter: every GPU test of the suite. The tests get
# at most half of the check's time, all of it without the timings.
tests_rc=0
tests_deadline=$((start + minutes * 30))
wants timing || tests_deadline=$deadline
# nvJPEG (data_tests' Nvjpeg*) is loaded at run time: the toolkit's, or
# PyPI's nvidia-nvjpeg wheel's (nvidia/cu13/lib, nvidia/nvjpeg/lib) where
# python3 has one.
for wheel in $(python3 -c "import nvidia; print(' '.join(nvidia.__path__))" 2>/dev/null); do
  for lib in "$wheel"/cu13/lib "$wheel"/nvjpeg/lib; do
    [[ -e $lib/libnvjpeg.so.13 || -e $lib/libnvjpeg.so.12 ]] && export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  done
done
: >"$out/tests.txt"
if ! wants tests; then
  tests_rc=3
  specs=()
else
  step "GPU tests"
  specs=("core_tests:Cuda*" "layers_tests:CudaLayers.*:CudaDropout.*:*GpuMatchesCpu*:GpuBf16.*:GpuBf16Blobs.*"
    "tools_tests:InfoVerb*:Plugin.CpuOnlyLayerTrainsInAGpuNet:CudaLateRead.*:CudaResume.*:CudaGraphRun.*"
    "dist_tests:Cuda*" "data_tests:Nvjpeg*:EncodedFixture.GpuFeed*")
fi
for spec in "${specs[@]}"; do
  binary=${spec%%:*}
  filter=${spec#*:}
  # A build without a part (the kit has no image decoding, so no nvJPEG
  # tests) says so rather than passing zero tests.
  if ! timeout -k 5 60 "$tests/$binary" --gtest_list_tests --gtest_filter="$filter" 2>/dev/null | grep -q '^  '; then
    echo "$binary: no test matches $filter in this build (not run)" | tee -a "$out/tests.txt"
    continue
  fi
  "$root/tools/gtest_isolated.sh" "$tests/$binary" "$filter" "$out/$binary.log" 180 "$tests_deadline" |
    tee -a "$out/tests.txt"
  # 2: none failed, but the deadline left some not run.
  case ${PIPESTATUS[0]} in
    0) ;;
    2) ((tests_rc == 0)) && tests_rc=2 ;;
    *) tests_rc=1 ;;
  esac
done

models=(vgg19 vgg19_22k inception_v3)
declare -A ours theirs
system_libraries=${system_libraries-${LD_LIBRARY_PATH-}}
# The math of each pass: float32 (TF32 off), the same with cuDNN's fastest
# backward algorithms rather than its deterministic ones (--deterministic false,
# against the same PyTorch numbers: its cudnn.benchmark picks the fastest too),
# TF32, bf16 mixed precision.
modes=(fp32 fp32_fastest tf32 bf16)
# PyTorch is probed once; bench/gpu_torch.py prints one JSON line per model
# as each finishes, so a run cut short still gives the models it timed.
torch_ok=false
if $torch && { wants timing || wants compiled; } && LD_LIBRARY_PATH=$system_libraries limited 90 python3 -c "import torch, torchvision, sys
sys.exit(0 if torch.cuda.is_available() else 'PyTorch sees no GPU')" 2>"$out/torch_probe.err"; then
  torch_ok=true
fi
torch_rate() {
  python3 -c "import json, sys
rates = {}
for line in open(sys.argv[1]):
    if line.startswith('{'):
        rates.update(json.loads(line))
print('%.1f' % rates[sys.argv[2]])" "$1" "$2" 2>/dev/null || echo "n/a"
}
# Runs bench/gpu_torch.py with ARGS into FILE.json (FILE.err), unless less
# than a minute is left: PyTorch's first steps alone take tens of seconds.
time_torch() {
  local file=$1 seconds=$2
  shift 2
  if ((deadline - $(date +%s) < 60)); then
    echo "gpu_check: out of time, not run: PyTorch $*" >&2
    return 125
  fi
  LD_LIBRARY_PATH=$system_libraries limited "$seconds" python3 "$root/bench/gpu_torch.py" --iters "$iters" "$@" \
    >"$file.json" 2>"$file.err" || tail -5 "$file.err"
}
declare -A eager_nhwc
wants timing && step "training speed, batch 32"
for mode in "${modes[@]}"; do
  wants timing || break
  tf32=0 precision=fp32 flag=() deterministic=true
  case $mode in
    fp32_fastest) deterministic=false ;;
    tf32) tf32=1 flag=(--tf32) ;;
    bf16) precision=bf16 flag=(--bf16) ;;
  esac
  for model in "${models[@]}"; do
    sets=()
    [[ $model == inception_v3 ]] && sets=(--set vars.aux=false)
    json="$out/time_${model}_$mode.json"
    POSEIDON_TF32=$tf32 limited 120 "$bin/poseidon" time "$root/models/$model.yaml" --device cuda --batch 32 --iters "$iters" \
      --warmup 3 --precision "$precision" --deterministic "$deterministic" "${sets[@]}" --json >"$json" 2>"${json%.json}.err"
    case $? in
      0) ours[$model.$mode]=$(python3 -c "import json,sys; print('%.1f' % json.load(open(sys.argv[1]))['images_per_sec'])" \
        "$json") ;;
      125) ours[$model.$mode]="not run (out of time)" ;;
      124 | 137) ours[$model.$mode]="over its time limit" ;;
      *)
        ours[$model.$mode]="failed"
        tail -3 "${json%.json}.err"
        ;;
    esac
  done
  if [[ $mode == fp32_fastest ]]; then
    for model in "${models[@]}"; do theirs[$model.$mode]=${theirs[$model.fp32]-n/a}; done
  elif $torch_ok; then
    time_torch "$out/torch_$mode" 180 "${flag[@]}"
    for model in "${models[@]}"; do theirs[$model.$mode]=$(torch_rate "$out/torch_$mode.json" "$model"); done
    if [[ $mode == bf16 ]]; then
      # Eager channels-last against eager channels-first just before: what
      # the layout alone gives cuDNN's tensor-core convolutions on this GPU,
      # the measurement that decides whether NHWC activations are worth
      # building here.
      time_torch "$out/torch_channels_last_bf16" 180 --bf16 --channels-last
      for model in "${models[@]}"; do
        eager_nhwc[$model.bf16]=$(torch_rate "$out/torch_channels_last_bf16.json" "$model")
      done
    fi
  fi
done
# The float32 (TF32-off) timings are the models' profiles on this GPU, the
# bf16 ones its bf16 profiles (measured, replacing any derived from float32).
profiles=()
for model in "${models[@]}"; do
  for mode in fp32 bf16; do
    [[ ${ours[$model.$mode]-failed} == failed ]] && continue
    name=${model}_${gpu_tag}_b32.json
    [[ $mode == bf16 ]] && name=${model}_${gpu_tag}_bf16_b32.json
    cp "$out/time_${model}_$mode.json" "$root/profiles/$name"
    cp "$out/time_${model}_$mode.json" "$out/$name"
    profiles+=("profiles/$name")
  done
done

# Checkpoints (VGG19's are half a gigabyte) go to scratch, not OUT.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
two_rc=126 trace_rc=126 overlap=""
if wants ranks; then
step "two ranks on one GPU, and a traced iteration"
# device: cuda:0 puts both ranks on the one GPU on purpose (device: cuda
# would give each rank a GPU of its own and refuse two ranks on one).
# VGG19 on 32x32 synthetic images (no data set needed), 50 iterations.
limited 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$bin/poseidon" train "$root/configs/vgg19_synthetic.yaml" \
  --set device=cuda:0 --set net.vars.size=32 --set 'data.train.shape=[3,32,32]' --set solver.max_iter=50 \
  --set train.output_dir="$scratch/two_ranks" </dev/null >"$out/two_ranks.log" 2>&1
two_rc=$?
tail -3 "$out/two_ranks.log"
# VGG19 at batch 32, two iterations (the first ranks cuDNN's algorithms):
# the trace's device-to-host lane against its backward spans, full size.
limited 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$bin/poseidon" train "$root/configs/vgg19_synthetic.yaml" \
  --set device=cuda:0 --set solver.max_iter=2 --set train.display=1 --set data.train.size=128 \
  --set train.output_dir="$scratch/traced" --timeline "$out/trace.json" </dev/null >"$out/traced.log" 2>&1
trace_rc=$?
tail -2 "$out/traced.log"
overlap=$(python3 - "$out/trace.rank0.json" <<'EOF' 2>/dev/null || echo "no trace"
import json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
# The last iteration: spans after the last forward of the first layer began.
first = [e for e in events if e.get("cat") == "forward"]
begin = max(e["ts"] for e in first if e["name"] == first[0]["name"])
backward = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "backward" and e["ts"] >= begin]
copies = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "device-to-host" and e["ts"] >= begin]
def covered(spans):
    total, end = 0.0, -1.0
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total
both = covered([(max(a, c), min(b, d)) for a, b in copies for c, d in backward if min(b, d) > max(a, c)])
print("%d copies over %.1f ms, %.1f ms of them during backward (%.1f ms)" %
      (len(copies), covered(copies) / 1e3, both / 1e3, covered(backward) / 1e3))
EOF
)
fi

wants sanitizer && step "compute-sanitizer: racecheck and synccheck on a short training run"
# A small net with batch norm, a residual sum, a fan-out, concat, average
# and max pooling, dropout and fused conv/fc epilogues, 6 iterations at batch
# 8 (three plain, the fourth captured as a CUDA graph, two replays of it),
# float32 then bf16. A report fails it.
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo "")
sanitize_result="not run (no compute-sanitizer)"
wants sanitizer || sanitize_result="not asked (--only)"
replay_note=""
if [[ -n $sanitizer ]] && wants sanitizer; then
  # A report fails the check; a run cut by the time limits, or a device the
  # tool does not support, says so and fails nothing.
  sanitize_failed=false sanitize_ran=0 sanitize_notes=""
  cp "$root/tools/gpu_check_sanitize_net.yaml" "$scratch/sanitize_net.yaml"
  cat >"$scratch/sanitize.yaml" <<YAML
model: sanitize_net.yaml
seed: 1
device: cuda
data:
  train: {source: synthetic, shape: [3, 32, 32], num_classes: 10, size: 64, batch_size: 8}
solver: {type: sgd, lr: 0.01, momentum: 0.9, max_iter: 6}
train: {display: 1, final_checkpoint: false, output_dir: $scratch/sanitize}
YAML
  for tool in racecheck synccheck; do
    for precision in fp32 bf16; do
      log="$out/sanitize_${tool}_$precision.log"
      limited 90 "$sanitizer" --tool "$tool" --error-exitcode 3 "$bin/poseidon" train "$scratch/sanitize.yaml" \
        --set precision=$precision </dev/null >"$log" 2>&1
      rc=$?
      if ((rc == 125)); then
        sanitize_notes+="; $tool $precision and after not run (out of time)"
        break 2
      fi
      if grep -q "Device not supported" "$log"; then
        sanitize_notes+="; compute-sanitizer does not support this device ($(basename "$log"))"
        break 2
      fi
      if ((rc == 124 || rc == 137)); then
        sanitize_notes+="; $tool $precision over its time limit ($(basename "$log"))"
        continue
      fi
      sanitize_ran=$((sanitize_ran + 1))
      # 3 is a report (--error-exitcode); another status is the run itself failing.
      if ((rc != 0)); then
        sanitize_failed=true
        what="the run failed, status $rc"
        ((rc == 3)) && what="the tool reported errors"
        echo "$tool $precision: $what (see $log)"
        tail -5 "$log"
      fi
      # Replayed steps are what the check is for; say when none ran.
      grep -q "captured and replayed from here" "$log" ||
        replay_note=" (no step replayed as a CUDA graph in $(basename "$log"))"
    done
  done
  if $sanitize_failed; then
    sanitize_result=FAILED
  elif ((sanitize_ran == 0)); then
    sanitize_result="not run"
  else
    sanitize_result="clean in $sanitize_ran of 4 runs"
  fi
  sanitize_result+=$sanitize_notes
fi

declare -A compiled
if $torch_ok && wants compiled; then
  step "PyTorch under torch.compile with channels-last (the next target)"
  for mode in bf16 fp32; do
    flag=()
    [[ $mode == bf16 ]] && flag=(--bf16)
    time_torch "$out/torch_compiled_$mode" 240 "${flag[@]}" --compile --channels-last
    for model in "${models[@]}"; do compiled[$model.$mode]=$(torch_rate "$out/torch_compiled_$mode.json" "$model"); done
  done
fi

step "table"
{
  echo "date: $(date -u +%Y-%m-%d) $(timeout -k 5 30 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "| model (batch 32) | math | ours img/s | PyTorch img/s | ours / PyTorch | PyTorch channels-last | PyTorch compiled, channels-last | ours / that |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|"
  ratio() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$1" "$2" 2>/dev/null || echo "n/a"; }
  for mode in "${modes[@]}"; do
    for model in "${models[@]}"; do
      o=${ours[$model.$mode]-not asked}
      t=${theirs[$model.$mode]:-n/a}
      c=${compiled[$model.$mode]:-n/a}
      e=${eager_nhwc[$model.$mode]:-n/a}
      echo "| $model | $mode | $o | $t | $(ratio "$o" "$t") | $e | $c | $(ratio "$o" "$c") |"
    done
  done
  case $tests_rc in
    0) verdict=passed ;;
    2) verdict="none failed, some not run (out of time)" ;;
    3) verdict="not asked (--only)" ;;
    *) verdict=FAILED ;;
  esac
  if ! $torch_ok && { wants timing || wants compiled; }; then
    if ! $torch; then
      echo "PyTorch: not run (--skip-torch)"
    else
      echo "PyTorch: not usable here: $(tail -1 "$out/torch_probe.err" 2>/dev/null || echo "no probe") (the n/a columns)"
    fi
  fi
  echo "GPU tests: $verdict (see $out/*_tests.log)"
  echo "nvJPEG decode + transform, 16 JPEGs of ~500x375 to 224x224 (GPU against CPU, rate):"
  if ((tests_rc == 3)); then
    echo "  not asked (--only)"
  else
    grep -h '^nvJPEG ' "$out/data_tests.log" 2>/dev/null | sed 's/^/  /'
    grep -q '^nvJPEG ' "$out/data_tests.log" 2>/dev/null || echo "  not run (see the data_tests line below)"
  fi
  sed 's/^/  /' "$out/tests.txt"
  ran() { # STATUS LOG: what a step's status says
    case $1 in
      0) echo "${3:-trained}" ;;
      125) echo "not run (out of time)" ;;
      126) echo "not asked (--only)" ;;
      *) echo "failed, status $1 (see $2)" ;;
    esac
  }
  echo "two ranks on one GPU: $(ran "$two_rc" "$out/two_ranks.log")"
  echo "traced iteration: $(ran "$trace_rc" "$out/traced.log" "$overlap")"
  echo "compute-sanitizer racecheck, synccheck: $sanitize_result$replay_note"
  echo "profiles: ${profiles[*]:-none}"
  echo "total: $(($(date +%s) - start)) s"
} | tee "$out/table.md"
[[ ($tests_rc -eq 0 || $tests_rc -eq 3) && ($two_rc -eq 0 || $two_rc -eq 125 || $two_rc -eq 126) &&
  $sanitize_result != FAILED ]]
