#!/usr/bin/env bash
# The GPU check in one go, for a machine with an NVIDIA GPU (H100/H200): builds
# with the CUDA backend, runs the GPU tests (every layer against its CPU
# version, the allocator, the solver, the finite check), times vgg19,
# vgg19_22k and inception_v3 training steps at batch 32 on the GPU beside
# PyTorch's on the same GPU (when python3 has torch with CUDA), trains two
# ranks on the one GPU, and prints a short table. Everything it writes goes
# under OUT (default build-gpu/check).
#
# Usage: tools/gpu_check.sh [--build DIR] [--out DIR] [--iters N] [--skip-torch]
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-gpu"
out=""
iters=20
torch=true
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --skip-torch) torch=false; shift ;;
    *) echo "gpu_check: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
out=${out:-$build/check}
mkdir -p "$out"
start=$(date +%s)
step() { printf '\n== %s (%ds)\n' "$*" $(($(date +%s) - start)); }

step "build (POSEIDON_CUDA=ON)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPOSEIDON_CUDA=ON >"$out/cmake.log" 2>&1 &&
  cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1
build_rc=$?
if [[ $build_rc -ne 0 ]]; then
  tail -40 "$out/build.log" "$out/cmake.log"
  echo "gpu_check: the build failed" >&2
  exit 1
fi
"$build/poseidon" info | tee "$out/info.txt"

step "GPU tests"
gpu_tests='Cuda|GpuMatchesCpu|InfoVerb'
ctest --test-dir "$build" -R "$gpu_tests" --output-on-failure -j 4 >"$out/ctest.log" 2>&1
tests_rc=$?
grep -E "tests passed|Skipped|Failed|\*\*\*" "$out/ctest.log" | tail -40

step "training speed, batch 32"
declare -A ours theirs
for model in vgg19 vgg19_22k inception_v3; do
  sets=()
  [[ $model == inception_v3 ]] && sets=(--set vars.aux=false)
  if "$build/poseidon" time "$root/models/$model.yaml" --device cuda --batch 32 --iters "$iters" --warmup 3 \
      "${sets[@]}" --json >"$out/time_$model.json" 2>"$out/time_$model.err"; then
    ours[$model]=$(python3 -c "import json,sys; print('%.1f' % json.load(open(sys.argv[1]))['images_per_sec'])" \
      "$out/time_$model.json")
  else
    ours[$model]="failed"
    tail -3 "$out/time_$model.err"
  fi
done
if $torch && python3 -c "import torch, torchvision, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  python3 "$root/bench/gpu_torch.py" --iters "$iters" >"$out/torch.json" 2>"$out/torch.err" || tail -5 "$out/torch.err"
  for model in vgg19 vgg19_22k inception_v3; do
    theirs[$model]=$(python3 -c "import json,sys; print('%.1f' % json.load(open(sys.argv[1]))[sys.argv[2]])" \
      "$out/torch.json" "$model" 2>/dev/null || echo "n/a")
  done
fi

step "two ranks on one GPU"
mpirun --allow-run-as-root --oversubscribe -np 2 "$build/poseidon" train "$root/configs/fashion_mnist_lenet.yaml" \
  --set device=cuda --set solver.max_iter=200 --set train.test_interval=0 >"$out/two_ranks.log" 2>&1
two_rc=$?
tail -3 "$out/two_ranks.log"

step "table"
{
  echo "date: $(date -u +%Y-%m-%d) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo "| model (batch 32) | ours img/s | PyTorch img/s | ours / PyTorch |"
  echo "|---|---:|---:|---:|"
  for model in vgg19 vgg19_22k inception_v3; do
    o=${ours[$model]}
    t=${theirs[$model]:-n/a}
    ratio=$(python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$o" "$t" 2>/dev/null ||
      echo "n/a")
    echo "| $model | $o | $t | $ratio |"
  done
  echo "GPU tests: $([[ $tests_rc -eq 0 ]] && echo passed || echo FAILED) (ctest -R '$gpu_tests')"
  echo "two ranks on one GPU: $([[ $two_rc -eq 0 ]] && echo trained || echo "failed (see $out/two_ranks.log)")"
  echo "total: $(($(date +%s) - start)) s"
} | tee "$out/table.md"
[[ $tests_rc -eq 0 ]]
