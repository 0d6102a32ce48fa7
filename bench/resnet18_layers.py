#!/usr/bin/env python3
"""ResNet-18 (torchvision's architecture, written out here: no torchvision needed) exported as six
TorchScript layers for pipetrain: the stem (7x7 convolution, BatchNorm, max-pool), layer1 ..
layer4 (two BasicBlocks each) and the head (average pool, 10-way linear). Writes OUT/layer<i>.pt,
OUT/model.json and OUT/data.safetensors (random images of SIZE x SIZE, random labels).

  .venv/bin/python3 bench/resnet18_layers.py --out /tmp/resnet18 --size 64
"""
import argparse
import json
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
from export_torchscript import write_safetensors  # noqa: E402


class BasicBlock(nn.Module):
    def __init__(self, inputs, outputs, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.downsample = nn.Sequential()
        if stride != 1 or inputs != outputs:
            self.downsample = nn.Sequential(nn.Conv2d(inputs, outputs, 1, stride, bias=False),
                                            nn.BatchNorm2d(outputs))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.downsample(x))


def resnet18_layers(classes):
    stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                         nn.MaxPool2d(3, 2, 1))
    stages = [nn.Sequential(BasicBlock(i, o, s), BasicBlock(o, o, 1))
              for i, o, s in [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]]
    head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes))
    return [stem, *stages, head]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--size", type=int, default=64, help="image side in pixels")
    parser.add_argument("--rows", type=int, default=256, help="training images (a quarter as many to validate)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    layers = resnet18_layers(classes=10)
    for i, layer in enumerate(layers):
        torch.jit.script(layer).save(os.path.join(args.out, f"layer{i}.pt"))
    with open(os.path.join(args.out, "model.json"), "w") as out:
        json.dump({"layers": len(layers), "loss": "cross_entropy",
                   "input": {"shape": [3, args.size, args.size], "dtype": "float32"},
                   "labels": {"shape": [], "dtype": "int64"}}, out)
    images = lambda n: torch.randn(n, 3, args.size, args.size)
    labels = lambda n: torch.randint(0, 10, (n,))
    write_safetensors(os.path.join(args.out, "data.safetensors"),
                      {"train_inputs": images(args.rows), "train_labels": labels(args.rows),
                       "val_inputs": images(args.rows // 4), "val_labels": labels(args.rows // 4)})


if __name__ == "__main__":
    main()
