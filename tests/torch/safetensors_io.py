"""Minimal safetensors reader and writer for the PyTorch reference scripts.

Pure Python (json + struct) over torch and numpy, so the tests need no
third-party safetensors package. Layout: 8-byte little-endian header length,
JSON header {name: {"dtype", "shape", "data_offsets": [begin, end]},
"__metadata__": {str: str}}, then the raw little-endian data.
"""

import json
import struct

import numpy as np
import torch

# torch dtype -> (safetensors name, numpy dtype of the raw bytes)
_DTYPES = {
    torch.float32: ("F32", np.float32),
    torch.float64: ("F64", np.float64),
    torch.float16: ("F16", np.float16),
    torch.bfloat16: ("BF16", np.int16),  # numpy has no bfloat16: move the bits
    torch.int64: ("I64", np.int64),
    torch.int32: ("I32", np.int32),
}
_BY_NAME = {name: (dtype, np_dtype) for dtype, (name, np_dtype) in _DTYPES.items()}


def _raw_bytes(tensor):
    tensor = tensor.detach().cpu().contiguous()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.view(torch.int16)
    array = tensor.numpy()
    return array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()


def write(path, tensors, metadata=None):
    """Writes a dict of name -> tensor (dtypes in _DTYPES) and a str -> str map."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    chunks, offset = [], 0
    for name, tensor in tensors.items():
        if tensor.dtype not in _DTYPES:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {tensor.dtype}")
        data = _raw_bytes(tensor)
        header[name] = {
            "dtype": _DTYPES[tensor.dtype][0],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(8 + len(text)) % 8)  # data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)


def read(path):
    """Returns (dict of name -> tensor, metadata dict)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise ValueError(f"{path}: header length {n} exceeds the file")
    header = json.loads(blob[8 : 8 + n])
    data = memoryview(blob)[8 + n :]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        if info["dtype"] not in _BY_NAME:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {info['dtype']}")
        dtype, np_dtype = _BY_NAME[info["dtype"]]
        begin, end = info["data_offsets"]
        if not 0 <= begin <= end <= len(data):
            raise ValueError(f"{path}: tensor {name!r} has data_offsets {info['data_offsets']} out of range")
        array = np.frombuffer(data[begin:end], dtype=np.dtype(np_dtype).newbyteorder("<"))
        tensor = torch.from_numpy(array.astype(np_dtype)).reshape(info["shape"])
        tensors[name] = tensor.view(torch.bfloat16) if dtype == torch.bfloat16 else tensor
    return tensors, metadata
