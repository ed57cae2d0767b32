#!/usr/bin/env bash
# Creates bench/.venv with the current PyTorch release, the reference the CPU
# benchmarks compare against. PyPI's only Linux x86-64 torch wheel is the CUDA
# build: it links the CUDA libraries at load time, so it needs its nvidia-*
# dependencies (several GB) even to run on the CPU; `pip install torch` as is
# is the one install from PyPI that imports. Where PyPI cannot provide a
# working torch, the venv falls back to Debian's python3-torch (an older
# release) and says so. numpy comes along because torch warns on import
# without it; torchvision builds the twins of the reduced VGG19-22K and
# Inception-V3. NVIDIA DALI (nvidia-dali-cuda130, whose CPU pipeline
# bench/image_pipeline.sh runs without a GPU) is added to whichever torch the
# venv ends with. Safe to run again: an importable torch is kept.
set -euo pipefail

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv="$bench_dir/.venv"
python=${PYTHON:-python3}
debian_python=/usr/bin/python3

# DALI, once; its absence only leaves DALI out of bench/image_pipeline.sh.
add_dali() {
  "$venv/bin/python" -c 'import nvidia.dali' 2>/dev/null && return 0
  "$venv/bin/python" -m pip install --quiet nvidia-dali-cuda130 ||
    echo "setup_venv: nvidia-dali-cuda130 could not be installed; bench/image_pipeline.sh leaves DALI out" >&2
}

torch_version() {
  "$venv/bin/python" -c 'import numpy, torch; print(torch.__version__, "from", torch.__file__)' 2>/dev/null
}

shout() {
  printf '\n%s\n' "############################################################################" >&2
  printf '# %s\n' "$@" >&2
  printf '%s\n\n' "############################################################################" >&2
}

if [[ -x "$venv/bin/python" ]] && installed=$(torch_version); then
  echo "setup_venv: torch already installed: $installed"
  if ! "$venv/bin/python" -c 'import torchvision' 2>/dev/null; then
    "$venv/bin/python" -m pip install --quiet torchvision ||
      echo "setup_venv: torchvision could not be installed; the reduced VGG19-22K and Inception-V3 rows will fail" >&2
  fi
  if [[ $installed != *"$venv"* ]]; then
    echo "setup_venv: that is Debian's torch (an earlier fallback); remove $venv to try PyPI again"
  fi
  add_dali
  exit 0
fi

echo "setup_venv: creating $venv with the current torch release from PyPI (several GB of CUDA libraries come with it)"
if "$python" -m venv "$venv" &&
   "$venv/bin/python" -m pip install --quiet torch torchvision numpy &&
   installed=$(torch_version); then
  echo "setup_venv: installed torch $installed"
  add_dali
  exit 0
fi

shout "PyPI could not provide a working torch." \
      "FALLING BACK to Debian's python3-torch (apt install python3-torch):" \
      "an older release than PyPI's; benchmark results name the version used."
rm -rf "$venv"
"$debian_python" -m venv --system-site-packages "$venv"
if ! installed=$(torch_version); then
  echo "setup_venv: error: Debian's python3-torch is not importable either; install it with apt" >&2
  exit 1
fi
echo "setup_venv: using Debian's torch $installed"
add_dali
