"""The ResNet-style CNN the model tests, the RTL test and the benchmarks share."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["CNN", "Block"]


class Block(nn.Module):
    """Two 3x3 convolutions with batch norm, and a 1x1 shortcut when the shape changes.

    Parameters
    ----------
    cin, cout : int
        Input and output channels.
    stride : int
        Stride of the first convolution (and of the shortcut).
    """

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.sc = (None if stride == 1 and cin == cout else
                   nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (x if self.sc is None else self.sc(x)))


class CNN(nn.Module):
    """Stem (conv, batch norm, ReLU, 2x2 max pool), two residual blocks, global average pool,
    linear classifier: 1x8x8 images, as the digits data.

    Parameters
    ----------
    width : int
        Channels of the stem and the first block (the second block has twice as many).
    classes : int
        Output logits.
    """

    def __init__(self, width: int = 4, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, width, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2))
        self.l1 = Block(width, width, 1)
        self.l2 = Block(width, 2 * width, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.l2(self.l1(self.stem(x)))), 1))
