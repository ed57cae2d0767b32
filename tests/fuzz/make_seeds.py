#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into corpus/<target>/.

Usage: tests/fuzz/make_seeds.py [path/to/poseidon]
The safetensors seeds are checkpoints of inputs/tiny_config.yaml written by
the poseidon binary (default build/poseidon), plus the same tensors in every
other dtype the reader accepts. Seeds are small valid (or almost valid)
inputs; the fuzzer mutates them. Files the fuzzer found are merged into the
same folders by tools/fuzz.sh --merge.
"""
import gzip
import json
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"


def put(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / ("seed-" + name)).write_bytes(data if isinstance(data, bytes) else data.encode())


# Repeated block instances left out of the seeds: one instance of each block
# covers the expansion, and every instance costs time in each run.
REPEATS = re.compile(r"(?m)^  - \{name: (Mixed_5[cd]|Mixed_6[bcd]|Mixed_7c|layer[1-4]\.[2-9]|layer[2-4]\.1),.*\n")


def small_model(text):
    """A model file at a small input size, so that seeds build quickly."""
    size = "80" if "inception" in text else "32"  # Inception needs at least 75
    text = re.sub(r"(?m)^(\s+size:\s*)\d+", r"\g<1>" + size, text)
    text = re.sub(r"(?m)^(\s+num_classes:\s*)\d+", r"\g<1>10", text)
    return REPEATS.sub("", text)


def model_seeds():
    for f in sorted((ROOT / "models").glob("*.yaml")):
        put("model_yaml", f.stem + ".yaml", small_model(f.read_text()))
    put("model_yaml", "tiny.yaml", (HERE / "inputs" / "tiny_model.yaml").read_text())
    put("model_yaml", "every_layer.yaml", """name: every_layer
inputs: {data: [3, 9, 9], label: []}
layers:
  - {name: c1, type: conv, inputs: data, num_output: 4, kernel_size: [3, 2], stride: [1, 2], pad: [1, 0], dilation: 1,
     groups: 1, bias: true, weight_init: {type: gaussian, std: 0.1}, bias_init: constant, lr_mult: 1, decay_mult: 1,
     bias_lr_mult: 2, bias_decay_mult: 0}
  - {name: bn, type: batch_norm, eps: 1e-5, momentum: 0.1, affine: true}
  - {name: r, type: relu}
  - {name: p1, type: pool, mode: max, kernel_size: 2, stride: 1, pad: 1, ceil_mode: true}
  - {name: p2, type: pool, inputs: r, mode: avg, global: true}
  - {name: a, type: adaptive_avg_pool, inputs: r, output_size: [2, 3]}
  - {name: cat, type: concat, inputs: [p1, p1], axis: 1}
  - {name: f1, type: flatten, inputs: cat, axis: 1}
  - {name: f2, type: flatten, inputs: a}
  - {name: fc1, type: fc, inputs: f1, num_output: 6, weight_init: xavier}
  - {name: fc2, type: fc, inputs: f2, num_output: 6, bias: false, weight_init: msra}
  - {name: s, type: sum, inputs: [fc1, fc2], coefficients: [1, -0.5]}
  - {name: d, type: dropout, ratio: 0.2}
  - {name: sm, type: softmax, axis: -1}
  - {name: loss, type: softmax_loss, inputs: [d, label], loss_weight: 1, ignore_label: 2}
  - {name: acc, type: accuracy, inputs: [d, label], top_k: 2}
""")
    put("model_yaml", "blocks.yaml", """name: blocks
vars: {w: 2, deep: true, k: 3}
inputs: {data: [1, 8, 8], label: []}
blocks:
  unit:
    args: {out: null, stride: 1}
    output: relu
    layers:
      - {name: conv, type: conv, num_output: "${out * 2}", kernel_size: $k, stride: $stride, pad: "${(k - 1) - 1}"}
      - {name: relu, type: relu}
      - {name: extra, type: relu, inputs: relu, if: $deep}
  pair:
    args: {out: 1}
    layers:
      - {name: a, block: unit, inputs: $in, out: $out}
      - {name: b, block: unit, out: "${out + 1}", stride: 2}
layers:
  - {name: stem, block: pair, inputs: data, out: $w}
  - {name: side, type: conv, inputs: data, num_output: 6, kernel_size: 1, stride: 2, if: false}
  - {name: fc, type: fc, inputs: stem, num_output: 3}
  - {name: loss, type: softmax_loss, inputs: [fc, label]}
""")


def config_seeds():
    for f in sorted((ROOT / "configs").glob("*.yaml")):
        put("train_config", f.name, re.sub(r"(?m)^model:.*$", "model: model.yaml", f.read_text()))
    tiny = (HERE / "inputs" / "tiny_config.yaml").read_text()
    put("train_config", "tiny.yaml", tiny.replace("model: tiny_model.yaml", "model: model.yaml"))
    put("train_config", "every_key.yaml", """model: model.yaml
seed: 7
threads: 1
device: cpu
data:
  train: {source: synthetic, shape: [1, 6, 6], num_classes: 3, size: 20, seed: 2, batch_size: 5, shuffle: true,
          workers: 2, prefetch: 3}
  test: {source: image_list, list: list.txt, root: images, resize: [8, 8], crop: 6, crop_mode: random, mirror: true,
         mean: [0.5, 0.5, 0.5], std: 0.25, on_error: skip, batch_size: 2}
solver: {type: sgd, lr: 0.1, momentum: 0.9, nesterov: true, weight_decay: 1e-4, max_iter: 50, lr_policy: multistep,
         gamma: 0.5, step_size: 10, milestones: [10, 20], power: 2, min_lr: 0.001, warmup_iters: 5, warmup_start: 0.1,
         check_finite: true}
train: {display: 5, test_interval: 10, test_iters: 1, snapshot_interval: 25, output_dir: runs/x}
""")


def override_seeds():
    seeds = {
        "solver": "solver.lr=0.5\nsolver.momentum=0.5\nsolver.lr_policy=step\nsolver.step_size=2\n",
        "net_layers": "net.layers.fc1.num_output=5\nnet.layers.drop.ratio=0.5\nnet.layers.pool.kernel_size=1\n",
        "net_vars": "net.vars.width=2\nnet.vars.classes=5\n",
        "net_blocks": "net.blocks.conv_bn.args.out=3\nnet.blocks.conv_bn.layers.0.kernel_size=1\n",
        "inputs": "net.inputs.data=[1, 4, 4]\ndata.train.shape=[1, 4, 4]\n",
        "data": "data.train.batch_size=2\ndata.train.workers=1\ndata.test.size=4\nseed=5\nthreads=2\n",
        "train": "train.display=1\ntrain.snapshot_interval=2\ntrain.output_dir=out\nsolver.check_finite=false\n",
        "flow": "net.layers.fc2.weight_init={type: uniform, low: -1, high: 1}\nsolver.milestones=[1, 2]\n",
    }
    for name, text in seeds.items():
        put("overrides", name, text)


def idx_file(dims, payload):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(payload)


def framed(labels, images):
    return struct.pack("<H", len(labels)) + labels + images


def idx_seeds():
    labels = idx_file([3], [0, 2, 1])
    put("idx", "plain", framed(labels, idx_file([3, 4, 4], range(48))))
    put("idx", "channels", framed(labels, idx_file([3, 2, 2, 3], range(36))))
    put("idx", "gzipped", framed(gzip.compress(labels, mtime=0), gzip.compress(idx_file([3, 2, 5], range(30)), mtime=0)))


def safetensors_bytes(header, blobs):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def read_safetensors(data):
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        tensors[name] = (info["shape"], struct.unpack("<%df" % ((e - b) // 4), body[b:e]))
    return meta, tensors


def encode(dtype, values):
    if dtype == "F64":
        return "F64", struct.pack("<%dd" % len(values), *values)
    if dtype == "F16":
        return "F16", struct.pack("<%de" % len(values), *values)
    if dtype == "BF16":
        return "BF16", b"".join(struct.pack("<f", v)[2:] for v in values)
    if dtype == "I32":
        return "I32", struct.pack("<%di" % len(values), *[int(v * 100) for v in values])
    if dtype == "I64":
        return "I64", struct.pack("<%dq" % len(values), *[int(v * 100) for v in values])
    return "F32", struct.pack("<%df" % len(values), *values)


def rewrite(meta, tensors, dtype):
    header, blobs, offset = {"__metadata__": meta}, [], 0
    for name, (shape, values) in tensors.items():
        kind, blob = encode(dtype, values)
        header[name] = {"dtype": kind, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    return safetensors_bytes(header, blobs)


def safetensors_seeds(poseidon):
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([poseidon, "train", str(HERE / "inputs" / "tiny_config.yaml"), "--quiet",
                        "--set", "train.output_dir=" + tmp], check=True)
        for name in ("iter_3", "final"):
            data = (Path(tmp) / (name + ".safetensors")).read_bytes()
            put("safetensors", name + ".safetensors", data)
        meta, tensors = read_safetensors((Path(tmp) / "iter_3.safetensors").read_bytes())
        for dtype in ("F64", "F16", "BF16", "I32", "I64"):
            put("safetensors", "iter_3_" + dtype.lower() + ".safetensors", rewrite(meta, tensors, dtype))
        weights = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
        put("safetensors", "no_metadata.safetensors", rewrite({}, weights, "F32"))


def list_seeds():
    put("image_list", "plain.txt", "cat/1.jpg 0\ndog/2.png 1\n\n/abs/path/3.bmp 2\n")
    put("image_list", "spaces.txt", "with space/a b.jpg\t3\r\n  ./x/../y.jpeg   12  \n")


def tar_seeds():
    """Shards of two examples: tiny JPEG + label, as ustar, GNU and PAX tar files."""
    import io
    import tarfile
    jpeg = bytes.fromhex(  # an 8x8 JPEG (PIL, quality 50)
        "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a181616183123251d283a333d3c3933383740"
        "485c4e404457453738506d51575f626768673e4d71797064785c656763ffdb0043011112121815182f1a1a2f63423842636363636363636363636363"
        "6363636363636363636363636363636363636363636363636363636363636363636363636363ffc00011080008000803012200021101031101ffc400"
        "1500010100000000000000000000000000000005ffc40014100100000000000000000000000000000000ffc400150101010000000000000000000000"
        "0000000306ffc40014110100000000000000000000000000000000ffda000c03010002110311003f00920014efffd9")
    for fmt, name in ((tarfile.USTAR_FORMAT, "ustar"), (tarfile.GNU_FORMAT, "gnu"), (tarfile.PAX_FORMAT, "pax")):
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
            for i, label in enumerate((1, 3)):
                key = ("k" * (120 if fmt != tarfile.USTAR_FORMAT else 8)) + str(i)
                for ext, data in ((".jpg", jpeg), (".cls", str(label).encode())):
                    info = tarfile.TarInfo(key + ext)
                    info.size = len(data)
                    info.mtime = 0
                    tar.addfile(info, io.BytesIO(data))
        put("tar_shards", name + ".tar", out.getvalue())


if __name__ == "__main__":
    binary = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build" / "poseidon")
    model_seeds()
    config_seeds()
    override_seeds()
    idx_seeds()
    safetensors_seeds(binary)
    list_seeds()
    tar_seeds()
