#!/usr/bin/env bash
# Tar shards on hosts without a shared file system: 4 hosts of the emulated
# cluster (tools/cluster --host-dir), each seeing at the shards' path a
# folder of its own that holds only the shards `poseidon data placement`
# names for its rank, and in them every example the rank should not read
# given a label outside [0, num_classes), so that reading it stops the run.
# Asserts: the placement gives each epoch's examples to exactly one rank;
# each host lacks some shard; 4 ranks train 2 epochs on those hosts; a run
# resumed mid-epoch ends bit for bit equal to the run without the stop; a
# host that lacks one example of its own stops the run naming shard and
# member. Exits 77 (skipped) without root, network or mount namespaces.
#   tests/tools/cluster_own_shards_test.sh POSEIDON_BINARY
set -euo pipefail
poseidon=$(realpath "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
skip() {
  echo "SKIP: $*"
  exit 77
}
[[ $(id -u) -eq 0 ]] || skip "the emulated cluster needs root (network and mount namespaces)"
for program in ip tc unshare mount mpirun python3; do
  command -v "$program" >/dev/null || skip "$program is not installed (tools/packages-test.txt)"
done
probe=pzprobe$$
ip netns add "$probe" 2>/dev/null || skip "network namespaces are unavailable here (ip netns add failed)"
ip netns del "$probe"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir probe
unshare --mount mount --bind "$work/probe" "$work/probe" 2>/dev/null ||
  skip "bind mounts in a mount namespace of their own are unavailable here (unshare --mount mount --bind failed)"
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# 24 images of 2 classes in shards of 5 (the last of 4): a rank's 6
# examples of an epoch straddle shards, which ranks then share.
python3 - <<'EOF'
import os, struct
for i in range(24):
    os.makedirs(f"images/c{i % 2}", exist_ok=True)
    w, h = 12, 10
    row = b"".join(bytes(((i * 10 + x * 7) % 256, (255 - i * 10) % 256, (i % 2) * 200)) for x in range(w))
    pixels = row * h  # rows of 36 bytes: 4-byte aligned, no padding
    header = b"BM" + struct.pack("<IHHI", 54 + len(pixels), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(pixels), 2835, 2835, 0, 0)
    open(f"images/c{i % 2}/{i}.bmp", "wb").write(header + info + pixels)
EOF
"$poseidon" data shard --folder images -o all/train --per-shard 5 >/dev/null
mkdir -p mnt hosts
cat >model.yaml <<'EOF'
name: tiny
inputs: {data: [3, 8, 8], label: []}
layers:
  - {name: fc1, type: fc, inputs: data, num_output: 2}
  - {name: loss, type: softmax_loss, inputs: [fc1, label]}
EOF
# 2 examples per rank a batch: 3 iterations an epoch, 6 are 2 epochs.
cat >config.yaml <<EOF
model: model.yaml
seed: 5
threads: 1
data:
  train: {source: tar_shards, shards: $work/mnt/train.json, random_resized_crop: 8, mirror: true,
          shuffle_buffer: 3, batch_size: 2, workers: 1}
solver: {lr: 0.1, momentum: 0.9, max_iter: 6}
train: {display: 0, snapshot_interval: 2}
EOF
# The placement is computed from the index alone, with no shard at hand.
cp all/train.json mnt/
"$poseidon" data placement config.yaml --ranks 4 >placement.txt
rm mnt/train.json

# Each host's folder: the index, the shards of its rank, and in those every
# example outside the rank's parts relabelled 9 (outside [0, 2)).
# EXTRA "RANK SHARD EXAMPLE": that example of its own relabelled as well.
make_hosts() {
  rm -rf hosts && mkdir hosts
  python3 - "$@" <<'EOF'
import collections, io, os, shutil, sys, tarfile
extra = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3])) if len(sys.argv) > 1 else None
parts = collections.defaultdict(set)  # (rank, shard) -> examples it reads
epochs = collections.defaultdict(list)  # (epoch, shard) -> (first, last) of each rank
for line in open("placement.txt"):
    if line.startswith("#"):
        continue
    rank, epoch, shard, first, last = line.split()
    shard = os.path.basename(shard)
    parts[int(rank), shard].update(range(int(first), int(last)))
    epochs[int(epoch), shard].append((int(first), int(last)))
sizes = {}
for name in sorted(os.listdir("all")):
    if name.endswith(".tar"):
        with tarfile.open(f"all/{name}") as t:
            sizes[name] = len({m.name.split(".")[0] for m in t.getmembers()})
for epoch in sorted({e for e, _ in epochs}):
    for shard, size in sizes.items():
        covered = sorted(x for first, last in epochs[epoch, shard] for x in range(first, last))
        if covered != list(range(size)):
            sys.exit(f"placement: epoch {epoch}, {shard}: examples {covered} read, expected each of 0..{size - 1} once")
for rank in range(4):
    os.makedirs(f"hosts/host{rank}")
    shutil.copy("all/train.json", f"hosts/host{rank}/")
    own = [s for (r, s) in parts if r == rank]
    if len(own) == len(sizes):
        sys.exit(f"placement: rank {rank} reads every shard; the hosts would not differ")
    for shard in own:
        keep = set(parts[rank, shard])
        if extra and extra[0] == rank and extra[1] == shard:
            keep.discard(extra[2])
        with tarfile.open(f"all/{shard}") as src, tarfile.open(f"hosts/host{rank}/{shard}", "w") as dst:
            keys = []
            for m in src.getmembers():
                key = m.name.split(".")[0]
                if key not in keys:
                    keys.append(key)
                data = src.extractfile(m).read()
                if m.name.endswith(".cls") and keys.index(key) not in keep:
                    data = b"9" * len(data.strip()) + data[len(data.strip()):]
                m.size = len(data)
                dst.addfile(m, io.BytesIO(data))
EOF
}
make_hosts

cluster() {
  "$repo/tools/cluster" --hosts 4 --subnet 10.213.49 --host-dir "$work/hosts:$work/mnt" -- "$poseidon" "$@"
}
cluster train config.yaml --quiet --set train.output_dir="$work/straight" >straight.log 2>&1 ||
  { cat straight.log; fail "4 ranks on hosts holding only their shards did not train"; }
cluster train config.yaml --quiet --set train.output_dir="$work/resumed" --resume "$work/straight/iter_4.safetensors" \
  >resumed.log 2>&1 || { cat resumed.log; fail "the run resumed at iteration 4 (mid-epoch) did not train"; }
python3 - <<'EOF' || fail "the resumed run differs from the run without the stop"
import json, struct, sys
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return {k: raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in header.items()}
a, b, start = (tensors(p) for p in ("resumed/final.safetensors", "straight/final.safetensors",
                                     "straight/iter_4.safetensors"))
assert "optimizer.fc1.weight.momentum_buffer" in b, sorted(b)
if a != b:
    sys.exit("differing: " + " ".join(k for k in b if a.get(k) != b[k]))
assert start["fc1.weight"] != b["fc1.weight"], "the last two iterations did not move fc1.weight"
EOF

# The control: host 2 lacks (relabels) one example that its rank reads in
# the second epoch; the run must stop there, naming the shard and member.
read -r shard example < <(awk '$1 == 2 && $2 == 1 { print $3, $4; exit }' placement.txt)
shard=$(basename "$shard")
make_hosts 2 "$shard" "$example"
if cluster train config.yaml --quiet --set train.output_dir="$work/control" >control.log 2>&1; then
  fail "a host lacking one example of its rank's placement trained anyway: the hosts' folders are not what the ranks read"
fi
grep -q "$shard: member '.*\.cls': label 9 is outside \[0, 2)" control.log ||
  { cat control.log; fail "the control run did not stop on $shard's relabelled member"; }
echo "PASS: 4 hosts holding only their shards trained 2 epochs, resumed bit for bit; the control stopped on $shard"
