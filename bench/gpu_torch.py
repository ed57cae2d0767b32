"""PyTorch's training speed on the GPU for the benchmark models, the peer of
`poseidon time --device cuda` in tools/gpu_check.sh: torchvision's vgg19,
vgg19 with VGG19-22K's 21,841 classes and inception_v3 (no auxiliary head,
as the engine is run) at batch 32 and full input size, one step = forward,
cross-entropy, backward and an SGD-with-momentum update, TF32 off like the
engine by default (--tf32 turns it on for matrix products and convolutions,
as POSEIDON_TF32=1 does for the engine; --bf16 runs forward and loss under
bfloat16 autocast, as the engine's precision bf16; --compile times the
model under torch.compile, --channels-last with its input and weights in
channels-last memory format, the two settings beyond PyTorch's defaults that
a user tuning for speed reaches for). Prints one JSON object per model, one
line each as the model finishes: {model: images per second}, so that a run
cut short by a time limit still gives the models it timed."""

import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F


def build(name: str):
    import torchvision
    if name == "vgg19":
        return torchvision.models.vgg19(weights=None), 224, 1000
    if name == "vgg19_22k":
        return torchvision.models.vgg19(weights=None, num_classes=21841), 224, 21841
    if name == "inception_v3":
        return torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=False), 299, 1000
    raise ValueError(name)


def images_per_second(name: str, batch: int, iters: int, warmup: int, bf16: bool, compiled: bool,
                      channels_last: bool) -> float:
    model, size, classes = build(name)
    model = model.cuda().train()
    data = torch.randn(batch, 3, size, size, device="cuda")
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        data = data.contiguous(memory_format=torch.channels_last)
    label = torch.randint(0, classes, (batch,), device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=1e-5, momentum=0.9)
    if compiled:
        model = torch.compile(model)

    def step():
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(data), label)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        step()
    torch.cuda.synchronize()
    return batch * iters / (time.perf_counter() - start)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--models", nargs="+", default=["vgg19", "vgg19_22k", "inception_v3"])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--tf32", action="store_true", help="TF32 tensor cores for FP32 products and convolutions")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast for forward and loss")
    p.add_argument("--compile", action="store_true", help="the model under torch.compile (default mode)")
    p.add_argument("--channels-last", action="store_true", help="input and weights in channels-last format")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("PyTorch sees no GPU", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cudnn.benchmark = True  # algorithm chosen once per shape, as the engine does
    for m in args.models:
        rate = images_per_second(m, args.batch, args.iters, args.warmup, args.bf16, args.compile, args.channels_last)
        print(json.dumps({m: rate}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
