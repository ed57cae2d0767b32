#!/usr/bin/env bash
# Decode + augment throughput of the image pipeline (images per second, 2
# worker threads, batch 32): resize of the shorter side to 256, random
# 224x224 crop, random mirror, ImageNet mean/std, from 256 JPEGs of about
# 500x375 that this script generates once. Set against torchvision's
# ImageFolder + DataLoader(num_workers=2) with the same transforms, in two
# forms: on tensors (ToTensor first, then a bilinear Resize without
# antialiasing: the engine's arithmetic) and the usual PIL form (Resize on
# the PIL image, antialiased); and NVIDIA DALI's CPU pipeline with the same
# transforms and threads (bench/image_pipeline_dali.py, from bench/.venv:
# bench/setup_venv.sh installs nvidia-dali-cuda130; left out, saying so,
# where the venv lacks it). Rounds alternate them; medians are printed.
# The same again for the Inception-style random resized crop (224x224,
# torchvision's RandomResizedCrop; ours decodes JPEGs at a reduced size and
# only the crop's region where it can).
#
#   bench/image_pipeline.sh [rounds=3]
#
# POSEIDON_BUILD_DIR picks the build folder (default build/, a Release build);
# POSEIDON_BENCH_IMAGES the image folder (default $TMPDIR/poseidon-bench-images).
# torchvision comes from Debian's python3-torchvision, run by /usr/bin/python3;
# DALI from bench/.venv (POSEIDON_BENCH_VENV picks another venv).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${POSEIDON_BUILD_DIR:-$root/build}
images=${POSEIDON_BENCH_IMAGES:-${TMPDIR:-/tmp}/poseidon-bench-images}
rounds=${1:-3}
venv=${POSEIDON_BENCH_VENV:-$root/bench/.venv}

source "$root/bench/release_build.sh"
release_build image_pipeline "$build"
if ! log=$(cmake --build "$build" --target image_pipeline_bench 2>&1); then
  echo "$log" >&2
  exit 1
fi

exec /usr/bin/python3 - "$build/image_pipeline_bench" "$images" "$rounds" "$venv/bin/python" \
  "$root/bench/image_pipeline_dali.py" <<'EOF'
import json, os, statistics, subprocess, sys, time

bench, images, rounds, venv_python, dali_script = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
WORKERS, BATCH, EPOCHS, RESIZE, CROP = 2, 32, 3, 256, 224
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def generate(folder, count=256, classes=4):
    """Smooth colour fields, blurred discs and sensor-like noise: JPEGs of
    photo-like size (about 50 KB at quality 90), not incompressible noise."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFilter
    rng = np.random.default_rng(0)
    sizes = [(500, 375), (375, 500), (500, 333), (480, 360), (500, 400)]
    for i in range(count):
        w, h = sizes[i % len(sizes)]
        y, x = np.mgrid[0:h, 0:w].astype(np.float32)
        img = np.zeros((h, w, 3), np.float32) + rng.uniform(60, 190, 3)
        for c in range(3):
            for _ in range(3):
                fx, fy = rng.uniform(0.002, 0.03, 2)
                img[..., c] += 40 * np.sin(2 * np.pi * (fx * x + fy * y) + rng.uniform(0, 6.3))
        pic = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
        draw = ImageDraw.Draw(pic)
        for _ in range(12):
            cx, cy, r = rng.integers(0, w), rng.integers(0, h), rng.integers(10, 80)
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
        pic = pic.filter(ImageFilter.GaussianBlur(1.2))
        arr = np.asarray(pic).astype(np.float32) + rng.normal(0, 5, (h, w, 3))
        os.makedirs(f"{folder}/class{i % classes}", exist_ok=True)
        Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8)).save(f"{folder}/class{i % classes}/{i:04d}.jpg",
                                                                     quality=90)
    open(f"{folder}/.complete", "w").close()


def run_poseidon(augmentation):
    out = subprocess.run([bench, images, str(WORKERS), str(EPOCHS), str(BATCH), str(RESIZE), str(CROP), augmentation],
                         check=True, capture_output=True, text=True).stdout
    return statistics.median(json.loads(out)["images_per_sec"])


def run_dali(augmentation):
    out = subprocess.run([venv_python, dali_script, images, str(WORKERS), str(EPOCHS), str(BATCH), str(RESIZE),
                          str(CROP), augmentation], check=True, capture_output=True, text=True).stdout
    return statistics.median(json.loads(out)["images_per_sec"])


def has_dali():
    return os.path.exists(venv_python) and subprocess.run(
        [venv_python, "-c", "import nvidia.dali"], capture_output=True).returncode == 0


def run_torchvision(augmentation, form):
    import torch
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder
    if augmentation == "rrc":
        crop = T.RandomResizedCrop(CROP, antialias=False) if form == "tensor" else T.RandomResizedCrop(CROP)
        steps = [crop, T.RandomHorizontalFlip()]
    else:
        tail = [T.RandomCrop(CROP), T.RandomHorizontalFlip()]
        steps = [T.Resize(RESIZE, antialias=False) if form == "tensor" else T.Resize(RESIZE), *tail]
    if form == "tensor":
        transform = T.Compose([T.ToTensor(), *steps, T.Normalize(MEAN, STD)])
    else:
        transform = T.Compose([*steps, T.ToTensor(), T.Normalize(MEAN, STD)])
    loader = torch.utils.data.DataLoader(ImageFolder(images, transform), batch_size=BATCH, shuffle=True,
                                         num_workers=WORKERS, persistent_workers=True)
    rates = []
    for epoch in range(EPOCHS + 1):  # the first epoch starts the workers and warms up
        start, count = time.perf_counter(), 0
        for data, _ in loader:
            count += data.shape[0]
        if epoch > 0:
            rates.append(count / (time.perf_counter() - start))
    return statistics.median(rates)


if not os.path.exists(f"{images}/.complete"):
    print(f"generating 256 JPEGs in {images} ...", flush=True)
    generate(images)
dali = has_dali()
if not dali:
    print(f"DALI left out: {venv_python} cannot import nvidia.dali (bench/setup_venv.sh installs nvidia-dali-cuda130)")
for augmentation, title in (("fixed", f"resize {RESIZE}, random crop {CROP}"),
                            ("rrc", f"random resized crop {CROP}")):
    results = {"poseidon": [], "torchvision (tensor)": [], "torchvision (PIL)": []}
    for r in range(rounds):
        results["poseidon"].append(run_poseidon(augmentation))
        results["torchvision (tensor)"].append(run_torchvision(augmentation, "tensor"))
        results["torchvision (PIL)"].append(run_torchvision(augmentation, "pil"))
        if dali:
            results.setdefault("DALI (CPU)", []).append(run_dali(augmentation))
        print(f"{augmentation} round {r + 1}/{rounds}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in results.items()),
              flush=True)
    median = {k: statistics.median(v) for k, v in results.items()}
    print(f"\n{os.cpu_count()} CPUs, {WORKERS} workers, batch {BATCH}, {title}, mirror, "
          f"normalise; median images/s over {rounds} rounds; load average {os.getloadavg()[0]:.1f}")
    for name, rate in median.items():
        print(f"  {name:22s} {rate:8.1f} img/s" + ("" if name == "poseidon" else
                                                  f"   poseidon / this = {median['poseidon'] / rate:.2f}"))
    print()
EOF
