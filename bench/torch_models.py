"""PyTorch twins of models/lenet.yaml, models/cifar10_quick.yaml,
models/vgg_small.yaml, models/mlp_2048.yaml and models/resnet_small.yaml:
the same layers, shapes and pooling semantics (Caffe's ceil-mode pooling in
cifar10_quick), so that training speed can be compared layer for layer with
the engine; and of reduced versions of
models/vgg19_22k.yaml and models/inception_v3.yaml, which are written under
torchvision's names and so are torchvision's own models."""

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
from torch import nn


def lenet() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 20, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(20, 50, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(),
        nn.Linear(50 * 4 * 4, 500), nn.ReLU(),
        nn.Linear(500, 10),
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
        nn.Linear(64, 10),
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
        nn.Linear(512, 10),
    )


def mlp_2048() -> nn.Module:
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(3 * 32 * 32, 2048), nn.ReLU(),
        nn.Linear(2048, 2048), nn.ReLU(),
        nn.Linear(2048, 2048), nn.ReLU(),
        nn.Linear(2048, 10),
    )


class BasicBlock(nn.Module):
    """torchvision's BasicBlock: two 3x3 convolutions with batch norm, and a
    1x1 projection shortcut where the stride or width changes."""

    def __init__(self, in_channels: int, width: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.downsample = None
        if stride != 1 or in_channels != width:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, width, 1, stride, bias=False), nn.BatchNorm2d(width))
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        return self.relu(self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x))))) + shortcut)


def resnet_small() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        BasicBlock(32, 32), BasicBlock(32, 32),
        BasicBlock(32, 64, 2), BasicBlock(64, 64),
        BasicBlock(64, 128, 2), BasicBlock(128, 128),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(128, 10),
    )


def vgg19_22k() -> nn.Module:
    import torchvision
    return torchvision.models.vgg19(weights=None, num_classes=21841)


class Vgg19Narrow(nn.Module):
    """VGG19-22K at half the convolutions' widths and a classifier of 512
    hidden units (models/vgg19_22k.yaml's vars width=32, hidden=512):
    torchvision's VGG layers under its names and with its initialisation,
    22,898,033 parameters, 78% of them in the classifier, all 21,841
    classes. Not torchvision.models.VGG with its classifier replaced: that
    first builds the 4096-wide one, 0.9 GB, the peak memory of a rank."""

    def __init__(self):
        super().__init__()
        import torchvision
        widths = [32, 32, "M", 64, 64, "M", 128, 128, 128, 128, "M", 256, 256, 256, 256, "M",
                  256, 256, 256, 256, "M"]
        self.features = torchvision.models.vgg.make_layers(widths)
        self.avgpool = nn.AdaptiveAvgPool2d(7)
        self.classifier = nn.Sequential(
            nn.Linear(256 * 7 * 7, 512), nn.ReLU(True), nn.Dropout(),
            nn.Linear(512, 512), nn.ReLU(True), nn.Dropout(),
            nn.Linear(512, 21841),
        )
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0, 0.01)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def inception_v3_no_aux() -> nn.Module:
    import torchvision
    return torchvision.models.inception_v3(weights=None, num_classes=10, aux_logits=False, transform_input=False,
                                          init_weights=False)


@dataclass
class Bench:
    build: Callable[[], nn.Module]
    sample_shape: tuple
    classes: int
    has_accuracy: bool  # whether the model file also computes an accuracy output
    model_file: str  # under models/
    overrides: list = field(default_factory=list)  # --set for the engine, to match the twin
    batch: Optional[int] = None  # None: the comparison's batch size


# The reduced benchmark models keep what makes them what they are: every one
# of VGG19-22K's 229M parameters (its convolutions at 32x32 are cheap, its
# classifier is not) and all of Inception-V3's modules (at the smallest input
# they accept). vgg19_22k_32_narrow (23M parameters) is VGG19-22K for many
# ranks on one machine: all its layers and classes, the classifier still
# 78% of the parameters. Batch 32 per worker is the reference design's
# setting. The MLP runs at batch 128, where its matrix products are large
# enough to be compute-bound.
MODELS = {
    "lenet": Bench(lenet, (1, 28, 28), 10, True, "lenet.yaml"),
    "cifar10_quick": Bench(cifar10_quick, (3, 32, 32), 10, True, "cifar10_quick.yaml"),
    "vgg_small": Bench(vgg_small, (3, 32, 32), 10, False, "vgg_small.yaml"),
    "mlp_2048": Bench(mlp_2048, (3, 32, 32), 10, False, "mlp_2048.yaml", batch=128),
    "resnet_small": Bench(resnet_small, (3, 32, 32), 10, False, "resnet_small.yaml"),
    "vgg19_22k_32": Bench(vgg19_22k, (3, 32, 32), 21841, False, "vgg19_22k.yaml", ["vars.size=32"], 32),
    "vgg19_22k_32_narrow": Bench(Vgg19Narrow, (3, 32, 32), 21841, False, "vgg19_22k.yaml",
                                 ["vars.size=32", "vars.width=32", "vars.hidden=512"], 32),
    "inception_v3_75": Bench(inception_v3_no_aux, (3, 75, 75), 10, False, "inception_v3.yaml",
                             ["vars.size=75", "vars.aux=false", "vars.num_classes=10"], 32),
}


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


if __name__ == "__main__":
    for name, bench in MODELS.items():
        model = bench.build().eval()
        out = model(torch.zeros(2, *bench.sample_shape))
        print(f"{name}: input {list(bench.sample_shape)} -> output {list(out.shape[1:])}, "
              f"{parameter_count(model):,} parameters")
