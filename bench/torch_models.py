"""PyTorch twins of models/lenet.yaml, models/cifar10_quick.yaml and
models/vgg_small.yaml: the same layers, shapes and pooling semantics
(Caffe's ceil-mode pooling in cifar10_quick), so that training speed can be
compared layer for layer with the engine."""

import torch
from torch import nn

NUM_CLASSES = 10


def lenet() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 20, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(20, 50, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(),
        nn.Linear(50 * 4 * 4, 500), nn.ReLU(),
        nn.Linear(500, NUM_CLASSES),
    )


def cifar10_quick() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, kernel_size=5, padding=2),
        nn.MaxPool2d(3, 2, ceil_mode=True), nn.ReLU(),
        nn.Conv2d(32, 32, kernel_size=5, padding=2), nn.ReLU(),
        nn.AvgPool2d(3, 2, ceil_mode=True),
        nn.Conv2d(32, 64, kernel_size=5, padding=2), nn.ReLU(),
        nn.AvgPool2d(3, 2, ceil_mode=True),
        nn.Flatten(),
        nn.Linear(64 * 4 * 4, 64),
        nn.Linear(64, NUM_CLASSES),
    )


def _vgg_stage(in_channels: int, channels: int) -> list:
    return [
        nn.Conv2d(in_channels, channels, kernel_size=3, padding=1), nn.ReLU(),
        nn.Conv2d(channels, channels, kernel_size=3, padding=1), nn.ReLU(),
        nn.MaxPool2d(2, 2),
    ]


def vgg_small() -> nn.Module:
    return nn.Sequential(
        *_vgg_stage(3, 64), *_vgg_stage(64, 128), *_vgg_stage(128, 256),
        nn.Flatten(),
        nn.Linear(256 * 4 * 4, 512), nn.ReLU(),
        nn.Linear(512, NUM_CLASSES),
    )


# name -> (constructor, per-sample input shape, whether the model file also
# computes an accuracy output)
MODELS = {
    "lenet": (lenet, (1, 28, 28), True),
    "cifar10_quick": (cifar10_quick, (3, 32, 32), True),
    "vgg_small": (vgg_small, (3, 32, 32), False),
}


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


if __name__ == "__main__":
    for name, (build, shape, _) in MODELS.items():
        model = build()
        out = model(torch.zeros(2, *shape))
        print(f"{name}: input {list(shape)} -> output {list(out.shape[1:])}, "
              f"{parameter_count(model):,} parameters")
