# The fresh-root checks' common part (tools/fresh_machine_check.sh,
# tools/deb_check.sh): a minimal Debian 12 root in a folder of its own, the
# machine's kernel interfaces mounted in it, and on exit everything unmounted
# and the root removed. Sourced, not run. The sourcing script sets `script`
# (its name, for messages), `dir` (the folder, empty for a new one), `keep`,
# `root_tar` and `mirror`, and may add paths to `also_remove`.

mounts=()
also_remove=()

debian_root_needs_root() {
  [[ $(id -u) -eq 0 ]] || { echo "$script: needs root (chroot and mount)" >&2; exit 2; }
}

# Makes $dir (a new folder under /var/tmp named after $1, or the given one,
# which must be empty), readable by apt's _apt user, and resolves it.
debian_root_folder() {
  if [[ -z $dir ]]; then
    dir=$(mktemp -d "/var/tmp/poseidon-$1.XXXX")
  elif [[ -e $dir && -n $(ls -A "$dir") ]]; then
    echo "$script: $dir is not empty" >&2
    exit 2
  fi
  mkdir -p "$dir"
  chmod 755 "$dir"
  dir=$(realpath "$dir")
  trap debian_root_cleanup EXIT
  trap 'exit 130' INT TERM
}

debian_root_cleanup() {
  local status=$? i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount -R "${mounts[i]}" || umount -R -l "${mounts[i]}" || echo "could not unmount ${mounts[i]}" >&2
  done
  for i in "${also_remove[@]}"; do rm -rf "$i"; done
  # Nothing may still be mounted below the root when it is removed.
  if ! $keep && ! awk -v d="$dir/" 'index($2, d) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
    rm -rf --one-file-system "$dir"
  elif ! $keep; then
    echo "left $dir in place: something is still mounted below it" >&2
  fi
  exit "$status"
}

# The root itself: $root_tar unpacked, or debootstrap from $mirror (its log
# shown only when it fails); then /proc, /sys, /dev and name resolution.
debian_root_make() {
  if [[ -n $root_tar ]]; then
    echo "== unpacking $root_tar into $dir"
    tar -xpf "$root_tar" -C "$dir"
  else
    echo "== debootstrap --variant=minbase bookworm $dir $mirror"
    local log
    log=$(mktemp)
    also_remove+=("$log")
    debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$log" 2>&1 || {
      tail -20 "$log" >&2
      exit 1
    }
  fi
  [[ -x $dir/usr/bin/apt-get ]] || { echo "$script: $dir has no apt-get: not a Debian root" >&2; exit 1; }
  local m
  for m in proc sys dev; do
    mounts+=("$dir/$m")
    case $m in
      proc) mount -t proc proc "$dir/proc" ;;
      sys) mount -t sysfs sysfs "$dir/sys" ;;
      dev) mount --rbind /dev "$dir/dev" && mount --make-rslave "$dir/dev" ;;
    esac
  done
  cp -L /etc/resolv.conf "$dir/etc/resolv.conf"
}
