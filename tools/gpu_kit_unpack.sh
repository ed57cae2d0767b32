# Unpacks the GPU kit (tools/gpu_kit.sh) on the machine that runs it and sets
# up this shell to use it: sourced, not run, so that the variables stay.
#   source tools/gpu_kit_unpack.sh KIT.tar.gz
# The kit goes to /tmp/poseidon-kit (the place its test binaries were built
# for), its src/ a link to this checkout. cuDNN, cuBLAS and NCCL (and the
# CUDA runtime that plug-ins link) are the machine's own: pip's wheels under
# python3's site-packages/nvidia (any folder there that holds libcudnn.so.9,
# libcublas.so.13, libnccl.so.2 or libcudart.so.13; cuDNN loads its
# sub-libraries by name, so they must be on LD_LIBRARY_PATH), else the CUDA
# toolkit's. Returns non-zero, saying why, when a library the
# binaries need is missing or the C library is older than the kit's.
poseidon_kit_unpack() {
  local kit=$1 checkout dest=/tmp/poseidon-kit dirs=() dir lib missing need have
  checkout="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  if [[ ! -f $kit ]]; then
    echo "gpu_kit_unpack: no kit at '$kit' (tools/gpu_kit.sh makes it)" >&2
    return 1
  fi
  rm -rf "$dest"
  mkdir -p "$(dirname "$dest")"
  tar -C "$(dirname "$dest")" -xzf "$kit" || return 1
  ln -s "$checkout" "$dest/src"
  # Folders of the machine's CUDA libraries, wheels first.
  while read -r dir; do
    [[ -n $dir ]] && dirs+=("$dir")
  done < <(python3 - <<'EOF' 2>/dev/null
import os
try:
    import nvidia
except ImportError:
    raise SystemExit
wanted = {"libcudnn.so.9", "libcublas.so.13", "libcublasLt.so.13", "libnccl.so.2", "libcudart.so.13"}
for top in nvidia.__path__:
    for folder, _, files in os.walk(top):
        if wanted & set(files):
            print(folder)
EOF
  )
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [[ -d $dir ]] && dirs+=("$dir"); done
  local mpi=$dest/root/usr/lib/x86_64-linux-gnu
  export LD_LIBRARY_PATH="$dest/lib:$mpi/openmpi/lib:$mpi/pmix2/lib$(printf ':%s' "${dirs[@]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$dest/bin:$PATH"
  # Open MPI and PMIx find their components and help files from these.
  export OPAL_PREFIX=$dest/root/usr
  export PMIX_INSTALL_PREFIX=$mpi/pmix2
  # Components whose libraries were left out are not worth a warning, the
  # shared-memory transport copies through its buffers (no CMA in VMs), and
  # neither ssh nor rsh is needed on one host, but Open MPI refuses to start
  # unless its remote agent exists: any program stands in.
  export OMPI_MCA_mca_base_component_show_load_errors=0
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  export OMPI_MCA_plm_rsh_agent=false
  export POSEIDON_KIT=$dest
  missing=$(for f in "$dest"/bin/poseidon "$dest"/bin/*_tests "$dest"/plugins/*.so; do ldd "$f"; done |
    grep 'not found' | sort -u)
  if [[ -n $missing ]]; then
    echo "gpu_kit_unpack: libraries not found (searched $LD_LIBRARY_PATH):" >&2
    echo "$missing" >&2
    return 1
  fi
  need=$(sed -n 's/^glibc: //p' "$dest/MANIFEST")
  have=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
  if [[ -n $need && $(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1) != "$need" ]]; then
    echo "gpu_kit_unpack: the kit needs glibc $need, this machine has $have: build here instead (tools/gpu_check.sh without --kit)" >&2
    return 1
  fi
  sed -n 1,3p "$dest/MANIFEST"
  echo "CUDA libraries from: ${dirs[*]:-none found}"
}
poseidon_kit_unpack "$@"
