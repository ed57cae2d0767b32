#!/usr/bin/env bash
# Checks, without a GPU, that the GPU kit (tools/gpu_kit.sh) runs on a bare
# machine: a minimal Debian root (debootstrap --variant=minbase bookworm,
# given as a tarball) that has none of the development packages the build
# uses, with python3 added (the kit asks it where pip's CUDA wheels are) and
# this machine's cuDNN, cuBLAS and NCCL laid out as pip's wheels lay them out
# (site-packages/nvidia/{cudnn,nccl,cu13}/lib, versioned names only; the CUDA
# toolkit itself is not there). In a chroot of it the kit is unpacked from
# the checkout (bound read-write at /src) and the CPU tests run from it: the
# core, layers, data and tools test binaries, and the dist tests alone and
# under the kit's mpirun with two ranks. GPU tests skip (no GPU); tests that
# need PyTorch skip (POSEIDON_SKIP_TORCH=1). Needs root; the kit must exist.
#
# Usage: tools/gpu_kit_verify.sh --base ROOT.tar [--kit FILE] [--root DIR] [--keep]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
base=""
kit="$root/gpu-kit/poseidon-gpu-kit.tar.gz"
chroot_dir=""
keep=false
while [[ $# -gt 0 ]]; do
  case $1 in
    --base) base=$2; shift 2 ;;
    --kit) kit=$2; shift 2 ;;
    --root) chroot_dir=$2; shift 2 ;;
    --keep) keep=true; shift ;;
    *) echo "gpu_kit_verify: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[[ -f $base ]] || { echo "gpu_kit_verify: --base must name a minimal Debian root tarball" >&2; exit 2; }
[[ -f $kit ]] || { echo "gpu_kit_verify: no kit at $kit (tools/gpu_kit.sh makes it)" >&2; exit 2; }
[[ $kit == "$root"/* ]] || { echo "gpu_kit_verify: the kit must lie inside the checkout" >&2; exit 2; }
cuda=$(readlink -f /usr/local/cuda)
[[ -f $cuda/lib/libcudnn.so.9 || -f $cuda/lib64/libcudnn.so.9 ]] ||
  { echo "gpu_kit_verify: needs cuDNN, cuBLAS and NCCL under /usr/local/cuda to lay out as wheels" >&2; exit 2; }
chroot_dir=${chroot_dir:-$(mktemp -d /var/tmp/poseidon-bare.XXXXXX)}
mkdir -p "$chroot_dir"
mounts=()
cleanup() {
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}" 2>/dev/null || true; done
  # Never delete through a mount that is still there (the checkout is one).
  if grep -q " $chroot_dir/" /proc/mounts; then
    echo "gpu_kit_verify: $chroot_dir is still mounted; left in place" >&2
  elif ! $keep; then
    rm -rf "$chroot_dir"
  fi
}
trap cleanup EXIT
bind() {  # bind SOURCE TARGET [ro]
  mkdir -p "$2"
  mount --bind "$1" "$2"
  mounts+=("$2")
  [[ ${3:-} == ro ]] && mount -o remount,bind,ro "$2"
  return 0
}

echo "== minimal root in $chroot_dir"
tar -C "$chroot_dir" -xf "$base"
cp /etc/resolv.conf "$chroot_dir/etc/resolv.conf"
bind /proc "$chroot_dir/proc"
bind /dev "$chroot_dir/dev"
bind /dev/pts "$chroot_dir/dev/pts"
bind /sys "$chroot_dir/sys"
bind "$root" "$chroot_dir/src"
# The CUDA libraries as pip's wheels hold them: one folder per package,
# versioned names only.
bind "$cuda" "$chroot_dir/opt/cuda-libraries" ro
libs=/opt/cuda-libraries/lib
[[ -f $cuda/lib/libcudnn.so.9 ]] || libs=/opt/cuda-libraries/lib64
wheels="$chroot_dir/opt/site-packages/nvidia"
mkdir -p "$wheels/cudnn/lib" "$wheels/nccl/lib" "$wheels/cu13/lib"
for f in "$chroot_dir$libs"/libcudnn*.so.9; do ln -s "$libs/$(basename "$f")" "$wheels/cudnn/lib/"; done
ln -s "$libs/libnccl.so.2" "$wheels/nccl/lib/"
ln -s "$libs/libcublas.so.13" "$libs/libcublasLt.so.13" "$libs/libcudart.so.13" "$wheels/cu13/lib/"

echo "== python3 into it (the kit asks python3 for pip's nvidia packages)"
chroot "$chroot_dir" /bin/bash -c 'export DEBIAN_FRONTEND=noninteractive; apt-get update -q >/dev/null &&
  apt-get install -y -q --no-install-recommends python3 >/dev/null && python3 --version'

echo "== the kit's tests in it"
rc=0
chroot "$chroot_dir" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin PYTHONPATH=/opt/site-packages \
  POSEIDON_SKIP_TORCH=1 /bin/bash -s "/src/${kit#"$root"/}" <<'EOF' || rc=$?
set -uo pipefail
absent=$(dpkg-query -W -f='${Package}\n' 2>/dev/null | grep -E '^(libyaml-cpp-dev|libopenblas.*|libopenmpi-dev|openmpi-bin|libgtest-dev|libcli11-dev|nlohmann-json3-dev|libopencv.*|libdnnl.*|cmake|g\+\+|nvidia.*|cuda.*)$')
[[ -z $absent ]] || { echo "not bare: $absent"; exit 1; }
echo "no development packages, no compiler, no CUDA toolkit: $(. /etc/os-release && echo "$PRETTY_NAME")"
source /src/tools/gpu_kit_unpack.sh "$1" || exit 1
cd /src
poseidon info | sed -n '1,20p'
status=0
run() {  # run NAME COMMAND...: its gtest summary
  local name=$1 log=/tmp/$1.log
  shift
  "$@" </dev/null >"$log" 2>&1 || { status=1; grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | head -20; tail -5 "$log"; }
  printf '%-16s %s\n' "$name" "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) *\]' "$log" | tr '\n' ' ')"
}
for t in core layers data tools; do run "${t}_tests" "$POSEIDON_KIT/bin/${t}_tests" --gtest_brief=1; done
run dist_tests.np1 "$POSEIDON_KIT/bin/dist_tests" --gtest_brief=1
run dist_tests.np2 mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader,tcp \
  "$POSEIDON_KIT/bin/dist_tests" --gtest_brief=1
# Two ranks of the CLI under the kit's mpirun, traced, as tools/gpu_check.sh
# runs them (on the CPU here). mpirun reads standard input, which is this
# script: it gets /dev/null instead.
mpirun --allow-run-as-root --oversubscribe -np 2 poseidon train configs/vgg19_synthetic.yaml --quiet \
  --set net.vars.size=32 --set 'data.train.shape=[3,32,32]' --set solver.max_iter=2 \
  --set train.final_checkpoint=true --set train.output_dir=/tmp/two_ranks --timeline /tmp/trace.json </dev/null >/tmp/two_ranks.log 2>&1 &&
  [[ -f /tmp/two_ranks/final.safetensors && -f /tmp/trace.rank1.json ]] || { status=1; tail -5 /tmp/two_ranks.log; }
echo "two ranks trained: $([[ -f /tmp/two_ranks/final.safetensors ]] && echo yes || echo no)"
exit $status
EOF
echo "== gpu_kit_verify: $([[ $rc -eq 0 ]] && echo passed || echo FAILED)"
exit $rc
