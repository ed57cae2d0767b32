#!/usr/bin/env bash
# The test job: installs what is missing (including Debian's python3-torch and
# python3-torchvision for the reference numerics), builds, and runs the whole
# suite with ctest, then the sanitizer pass (tools/sanitize.sh: the suite again
# under AddressSanitizer and UndefinedBehaviorSanitizer, in build-asan/).
#   tools/test.sh [--no-sanitize]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/deps.sh" build-essential cmake ninja-build pkg-config libyaml-cpp-dev libopenblas-dev libopenblas-openmp-dev \
  libcli11-dev nlohmann-json3-dev zlib1g-dev libgtest-dev libopencv-core-dev libopencv-imgproc-dev \
  libopencv-imgcodecs-dev libopenmpi-dev openmpi-bin libdnnl-dev dataset-fashion-mnist python3 python3-torch \
  python3-torchvision python3-numpy python3-matplotlib
sanitize=1
[ "${1:-}" = "--no-sanitize" ] && sanitize=0
"$root/tools/build.sh"
status=0
(cd "$root/build" && ctest --output-on-failure -j "$(nproc)" --timeout 1200) || status=$?
if [ $sanitize = 1 ]; then
  "$root/tools/sanitize.sh" || status=$?
fi
exit $status
