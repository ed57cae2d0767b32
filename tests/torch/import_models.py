"""The torch.nn models that tests/tools/import_torch_test.cpp imports.

Each callable builds its model under a fixed seed, so that
import_torch_reference.py, calling it again, holds the very same weights as
`poseidon import-torch tests/torch/import_models.py:NAME`. Batch norm layers
get random affine parameters and running statistics (as in
torchvision_forward.py), so that eval mode really normalises.
"""

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SEED = 1


def seeded(make, size):
    from torchvision_forward import randomise_batch_norm  # torchvision: only the models that need it

    torch.manual_seed(SEED)
    model = make()
    randomise_batch_norm(model, size)
    return model.eval()


def vgg19():
    import torchvision

    return seeded(lambda: torchvision.models.vgg19(weights=None), 32)


def resnet50():
    import torchvision

    return seeded(lambda: torchvision.models.resnet50(weights=None), 32)


def inception_v3():
    """With its auxiliary head, which eval mode does not call: the importer leaves it out.

    The head needs 299x299 inputs, so it sits out the training-mode pass that
    sets the batch norm statistics at 75x75 (its own keep their defaults)."""
    import torchvision

    head = None

    def without_head():
        nonlocal head
        model = torchvision.models.inception_v3(weights=None, aux_logits=True, init_weights=True)
        head, model.AuxLogits = model.AuxLogits, None
        return model

    model = seeded(without_head, 75)
    model.AuxLogits = head
    return model


class Tagger(nn.Module):
    """A recurrent model: poseidon has no LSTM layer."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.rnn = nn.LSTM(16, 16, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        out, _ = self.rnn(self.embed(x))
        return self.head(out[:, -1])


class ReflectPadded(nn.Module):
    """A convolution padding by reflection, which poseidon's conv (zeros) cannot reproduce."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect")
        )

    def forward(self, x):
        return self.features(x)


class _Branches(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding="same", bias=False)
        self.bn = nn.BatchNorm2d(4, eps=1e-3, momentum=0.01)
        self.b = nn.Conv2d(3, 4, (1, 3), padding=(0, 1))

    def forward(self, x):
        y = self.bn(self.a(x)) - self.b(x)
        return torch.sigmoid(y) * torch.tanh(y) + y


class _Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = _Branches()
        self.act = nn.PReLU(4)
        self.pool = nn.MaxPool2d(3, 2, 1, ceil_mode=True)
        self.avg = nn.AvgPool2d(3, 2, 1, count_include_pad=False)
        self.fc = nn.Linear(4 * 3 * 3, 5)

    def forward(self, x):
        x = self.avg(self.pool(self.act(self.block(x))))
        return F.softmax(self.fc(x.view(x.size(0), -1)), dim=1)


def mixed_layers():
    """What torchvision's three leave out: subtraction, products, 'same' padding, PReLU, ceil_mode, view."""
    return seeded(_Mixed, 10)
