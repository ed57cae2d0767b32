#!/usr/bin/env bash
# The GPU kit: everything tools/gpu_check.sh needs on a bare GPU machine (one
# that has the NVIDIA driver, the CUDA toolkit and python3 with pip's cuDNN,
# cuBLAS and NCCL wheels, but none of the Debian development packages), in
# one compressed file that travels beside the checkout. Made on a machine with
# the Debian packages (tools/test.sh installs them): a build with the CUDA
# backend for Hopper (sm_90), without the image pipeline and oneDNN
# (POSEIDON_IMAGES=OFF, POSEIDON_ONEDNN=OFF), of `poseidon` and the test
# binaries; beside them the shared libraries they need that a bare machine
# lacks (yaml-cpp, OpenBLAS, libgomp, libgfortran, libstdc++, ...), and Open
# MPI's runtime (mpirun, its components and help files, PMIx) in Debian's
# layout, relocated there through OPAL_PREFIX. cuDNN, cuBLAS and NCCL are
# never packed: the binaries take the target machine's own (the CUDA runtime
# is linked in statically). tools/gpu_kit_unpack.sh unpacks it there.
#
# The test binaries read the sources, run `poseidon` and load their plug-ins
# from a fixed place, KIT_ROOT (/tmp/poseidon-kit): the unpacking links
# KIT_ROOT/src to the checkout and puts the binaries in KIT_ROOT/bin, the
# plug-ins in KIT_ROOT/plugins.
#
# Usage:
#   tools/gpu_kit.sh [--build DIR] [--out DIR]   build and pack (default build-kit/, gpu-kit/)
#   tools/gpu_kit.sh --estimate BUILD_DIR        the packed size the kit would have with
#                                                BUILD_DIR's binaries; exit 1 over the budget
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build-kit"
out="$root/gpu-kit"
estimate=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --estimate) estimate=$2; shift 2 ;;
    *) echo "gpu_kit: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done

readonly KIT_ROOT=/tmp/poseidon-kit
# What travels to the GPU machine: the checkout's tracked files and the kit.
readonly BUDGET_BYTES=$((64 << 20))
readonly TEST_BINARIES=(core_tests layers_tests data_tests tools_tests dist_tests)
readonly TEST_PLUGINS=(plugin_swish plugin_overwrite plugin_no_marker plugin_other_version plugin_builtin_type)
readonly ARCH_LIBS=/usr/lib/x86_64-linux-gnu
# Open MPI's runtime in Debian's layout, relocated by OPAL_PREFIX.
readonly MPI_TREES=("$ARCH_LIBS/openmpi/lib" "$ARCH_LIBS/pmix2" /usr/share/openmpi)
readonly MPI_PROGRAMS=(/usr/bin/orterun /usr/bin/orted)
# Components that need what a single host does not use (InfiniBand verbs,
# UCX, libfabric, PSM, netlink) or OpenSHMEM: left out with those libraries.
readonly MPI_SKIPPED='_(ucx|ofi|openib|psm|psm2|usnic)\.so$|mca_(atomic|memheap|scoll|spml|sshmem)_|reachable_netlink'

# Where the kit's programs find their libraries here, as there: Open MPI's
# and PMIx's own folders, and the OpenMP build of OpenBLAS (the one the
# build links; the system's default libopenblas.so.0 may be another).
readonly SEARCH_PATH="$ARCH_LIBS/openmpi/lib:$ARCH_LIBS/pmix2/lib:$ARCH_LIBS/openblas-openmp"

# A library every Linux machine has (the C library and its parts) or one the
# kit must take from the target machine (the driver, cuDNN, cuBLAS, NCCL).
is_system_library() {
  [[ $1 =~ ^(ld-linux.*|linux-vdso.*|lib(c|m|dl|pthread|rt|util|resolv|anl|mvec)\.so\..*)$ ]] ||
    [[ $1 =~ ^lib(cuda|nvidia-.*|cudnn.*|cublas.*|cublasLt|nccl|cudart)\.so ]]
}

# Libraries of the full build that the kit's build leaves out.
is_left_out() { [[ $1 =~ ^lib(opencv_|dnnl) ]]; }

# Resolved paths of the non-system libraries the ELF files $@ need, through
# their NEEDED entries (a library left out is not followed further).
library_closure() {
  declare -A seen=()
  local queue=("$@") file name path
  while [[ ${#queue[@]} -gt 0 ]]; do
    file=${queue[0]}
    queue=("${queue[@]:1}")
    # Where the loader finds each library this file loads (ldd lists them all,
    # also the indirect ones), for this file's own NEEDED entries.
    declare -A found=()
    while read -r name path; do found[$name]=$path; done < <(LD_LIBRARY_PATH="$SEARCH_PATH" ldd "$file" 2>/dev/null |
      awk '$2 == "=>" { print $1, $3 }')
    for name in $(objdump -p "$file" | awk '$1 == "NEEDED" { print $2 }'); do
      if is_system_library "$name" || is_left_out "$name" || [[ -n ${seen[$name]:-} ]]; then continue; fi
      path=${found[$name]:-}
      if [[ ! -f $path ]]; then
        echo "gpu_kit: $file needs $name, which is not installed here" >&2
        exit 1
      fi
      seen[$name]=1
      echo "$path"
      queue+=("$path")
    done
    unset found
  done
}

# Lays the kit out in $1 from the binaries in build directory $2.
stage() {
  local dir=$1 from=$2 f
  mkdir -p "$dir/bin" "$dir/lib" "$dir/root/usr/bin"
  cp "$from/poseidon" "$dir/bin/"
  for f in "${TEST_BINARIES[@]}"; do cp "$from/tests/$f" "$dir/bin/"; done
  mkdir -p "$dir/plugins"
  cp "$from"/tests/libplugin_*.so "$dir/plugins/"
  # Open MPI and PMIx in their Debian paths under root/.
  for f in "${MPI_TREES[@]}"; do
    mkdir -p "$dir/root$(dirname "$f")"
    cp -a "$f" "$dir/root$(dirname "$f")/"
  done
  find "$dir/root" -name '*.so' -regextype egrep -regex ".*($MPI_SKIPPED)" -delete
  find "$dir/root" \( -name '*.la' -o -name '*.a' -o -name 'libmpi_java*' -o -name 'liboshmem*' -o -name 'pkgconfig' \
    -o -name 'libmpi_cxx*' -o -name 'libmpi_mpifh*' -o -name 'libmpi_usempi*' \) -exec rm -rf {} +
  rm -rf "$dir/root$ARCH_LIBS/openmpi/lib/openmpi3/mpi.jar" "$dir/root$ARCH_LIBS/pmix2/include"
  cp "${MPI_PROGRAMS[@]}" "$dir/root/usr/bin/"
  ln -s ../root/usr/bin/orterun "$dir/bin/mpirun"
  # Everything those need that a bare machine lacks, beside the binaries.
  local elves=("$dir"/bin/poseidon "$dir"/bin/*_tests "$dir"/plugins/*.so "$dir"/root/usr/bin/*)
  mapfile -t -O ${#elves[@]} elves < <(find "$dir/root" -name '*.so*' -type f)
  library_closure "${elves[@]}" | while read -r f; do
    # Open MPI's own libraries stay in its tree (the system's links to them too).
    [[ $(readlink -f "$f") == "$ARCH_LIBS"/openmpi/* || $(readlink -f "$f") == "$ARCH_LIBS"/pmix2/* ]] ||
      cp -L "$f" "$dir/lib/"
  done
  strip --strip-unneeded "$dir"/bin/poseidon "$dir"/bin/*_tests "$dir"/lib/*.so* 2>/dev/null || true
  {
    echo "poseidon GPU kit"
    echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
    # The newest C library symbol version anything here needs: the target
    # machine's glibc must be at least this.
    echo "glibc: $(find "$dir" -type f -name '*' -exec objdump -T {} + 2>/dev/null |
      grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 | cut -d_ -f2)"
  } >"$dir/MANIFEST"
}

# Bytes of the checkout's tracked files (they travel with the kit).
tree_bytes() { git -C "$root" ls-files -z | (cd "$root" && xargs -0 stat -c %s 2>/dev/null) | awk '{s += $1} END {print s + 0}'; }

report_size() {
  local kit=$1 tree total
  tree=$(tree_bytes)
  total=$((kit + tree))
  awk -v k="$kit" -v t="$tree" -v b=$((BUDGET_BYTES >> 20)) \
    'BEGIN { printf "gpu_kit: kit %.1f MiB + checkout %.1f MiB = %.1f MiB of the %d MiB that travel\n", k / 2^20, t / 2^20, (k + t) / 2^20, b }'
  if [[ $total -gt $BUDGET_BYTES ]]; then
    echo "gpu_kit: over the budget" >&2
    return 1
  fi
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

if [[ -n $estimate ]]; then
  # The full build's binaries stand in for the kit build's (they are larger:
  # two GPU architectures, oneDNN and OpenCV code), compressed the same way.
  stage "$scratch/poseidon-kit" "$estimate" 2>&1
  report_size "$(tar -C "$scratch" -cf - poseidon-kit | gzip -6 | wc -c)"
  exit
fi

source_ccache=/etc/profile.d/ccache-poseidon.sh
[[ -f $source_ccache ]] && source "$source_ccache"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPOSEIDON_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DPOSEIDON_IMAGES=OFF -DPOSEIDON_ONEDNN=OFF -DPOSEIDON_TEST_SOURCE_DIR="$KIT_ROOT/src" \
  -DPOSEIDON_TEST_BINARY="$KIT_ROOT/bin/poseidon" -DPOSEIDON_TEST_PLUGIN_DIR="$KIT_ROOT/plugins" \
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON \
  -DCMAKE_INSTALL_RPATH='$ORIGIN/../lib' >/dev/null
targets=()
for t in poseidon "${TEST_BINARIES[@]}" "${TEST_PLUGINS[@]}"; do targets+=(--target "$t"); done
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
stage "$scratch/poseidon-kit" "$build"
mkdir -p "$out"
tar -C "$scratch" -czf "$out/poseidon-gpu-kit.tar.gz" poseidon-kit
cat "$scratch/poseidon-kit/MANIFEST"
report_size "$(stat -c %s "$out/poseidon-gpu-kit.tar.gz")"
echo "gpu_kit: $out/poseidon-gpu-kit.tar.gz; on the GPU machine, from the checkout's root:"
echo "  tools/gpu_check.sh --kit ${out#"$root"/}/poseidon-gpu-kit.tar.gz"
