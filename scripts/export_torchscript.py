#!/usr/bin/env python3
"""Exports a PyTorch model layer by layer as TorchScript for pipetrain (docs/models.md).

Writes into OUT: layer0.pt, layer1.pt, ... (torch.jit.script of each layer, initial weights),
model.json (layer count, one row of inputs and labels, the loss) and data.safetensors (the
synthetic training and validation rows). With --train-steps N it also trains the same model in
PyTorch, one process, for N steps exactly as pipetrain trains it (AdamW at a constant learning
rate, no clipping, step s on rows s*B .. s*B+B-1 of the file), and writes reference.json (the
per-step losses) and reference.safetensors (the final weights, named as pipetrain names them).

  .venv/bin/python3 scripts/export_torchscript.py --out /tmp/conv1d --train-steps 4   # the venv's torch
  pipetrain train --model.kind torchscript --model.torchscript /tmp/conv1d \\
      --data.format safetensors --data.path /tmp/conv1d/data.safetensors ...

The model here is a small 1-D convolutional classifier of synthetic signals; to export your own,
replace make_layers() (each entry one stage-cuttable layer taking the previous one's output).
--batchnorm adds a BatchNorm1d to the first layer (running statistics: model state that is not a
parameter) and saves the layers in eval mode, as a model exported after evaluation is: pipetrain
trains them in train mode and validates in eval mode. With --train-steps, reference.json then
also holds the validation loss of the trained model in eval mode (val_loss: validation rows
0 .. batch_size-1, as pipetrain's eval.batches = 1 reads them) and reference.safetensors the
buffers beside the weights.
"""
import argparse
import json
import os
import struct

import torch
from torch import nn

SIGNAL_LENGTH, CHANNELS, CLASSES = 16, 4, 4


class ConvBlock(nn.Module):
    """A residual 1-D convolution: x + conv(tanh(x))."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, kernel_size=3, padding=1)

    def forward(self, x):
        return x + self.conv(torch.tanh(x))


def make_layers(batchnorm=False):
    # Before a BatchNorm a bias is cancelled by the mean it subtracts (its gradient is rounding
    # noise, which Adam would blow up): none, as ResNets have none.
    first = [nn.Conv1d(1, CHANNELS, kernel_size=3, padding=1, bias=not batchnorm)]
    if batchnorm:
        first.append(nn.BatchNorm1d(CHANNELS))
    return [
        nn.Sequential(*first, nn.Tanh()),  # [B,1,L] -> [B,C,L]
        ConvBlock(CHANNELS),
        ConvBlock(CHANNELS),
        nn.Sequential(nn.Flatten(), nn.LayerNorm(CHANNELS * SIGNAL_LENGTH)),  # -> [B, C*L]
        nn.Linear(CHANNELS * SIGNAL_LENGTH, CLASSES),  # logits
    ]


def synthetic_rows(rows, generator, teacher):
    """Gaussian signals labelled by a fixed random linear teacher."""
    signals = torch.randn(rows, 1, SIGNAL_LENGTH, generator=generator, dtype=torch.float64)
    return signals, (signals.flatten(1) @ teacher).argmax(1)


def write_safetensors(path, tensors):
    """The safetensors format, written by hand (pipetrain reads it; no extra package needed)."""
    names = {torch.float64: "F64", torch.float32: "F32", torch.int64: "I64"}
    header, blobs, offset = {}, [], 0
    for name, tensor in tensors.items():
        data = tensor.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": names[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def rows_of_step(split, step, rows):
    index = torch.arange(step * rows, step * rows + rows) % split[0].shape[0]
    return split[0][index], split[1][index]


def train_reference(layers, train, args):
    # One thread, as the test runs pipetrain: BatchNorm's float64 reductions then add in the same
    # order (with more threads they differ in the last bits, which Adam's steps magnify).
    torch.set_num_threads(1)
    model = nn.Sequential(*layers).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.99), eps=1e-8,
                                  weight_decay=args.weight_decay, foreach=False)
    losses = []
    for step in range(args.train_steps):
        inputs, labels = rows_of_step(train, step, args.batch_size)
        loss = nn.functional.cross_entropy(model(inputs), labels)
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder to write")
    parser.add_argument("--seed", type=int, default=0, help="weights and data")
    parser.add_argument("--train-rows", type=int, default=256)
    parser.add_argument("--val-rows", type=int, default=64)
    parser.add_argument("--train-steps", type=int, default=0, help="also train in PyTorch (0: don't)")
    parser.add_argument("--batch-size", type=int, default=8, help="rows per step (train.batch_size)")
    parser.add_argument("--lr", type=float, default=1e-2, help="train.lr = train.min_lr")
    parser.add_argument("--weight-decay", type=float, default=0.01, help="train.weight_decay")
    parser.add_argument("--batchnorm", action="store_true",
                        help="a BatchNorm1d in the first layer; layers saved in eval mode")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    layers = [layer.double() for layer in make_layers(args.batchnorm)]
    for i, layer in enumerate(layers):
        if args.batchnorm:
            layer.eval()  # saved as a model exported after evaluation is
        torch.jit.script(layer).save(os.path.join(args.out, f"layer{i}.pt"))
    with open(os.path.join(args.out, "model.json"), "w") as out:
        json.dump({"layers": len(layers), "loss": "cross_entropy",
                   "input": {"shape": [1, SIGNAL_LENGTH], "dtype": "float64"},
                   "labels": {"shape": [], "dtype": "int64"}}, out, indent=2)

    generator = torch.Generator().manual_seed(args.seed + 1)
    teacher = torch.randn(SIGNAL_LENGTH, CLASSES, generator=generator, dtype=torch.float64)
    train = synthetic_rows(args.train_rows, generator, teacher)
    val = synthetic_rows(args.val_rows, generator, teacher)
    write_safetensors(os.path.join(args.out, "data.safetensors"),
                      {"train_inputs": train[0], "train_labels": train[1],
                       "val_inputs": val[0], "val_labels": val[1]})
    if args.train_steps > 0:
        losses = train_reference(layers, train, args)
        model = nn.Sequential(*layers).eval()
        with torch.no_grad():
            inputs, labels = val[0][:args.batch_size], val[1][:args.batch_size]
            val_loss = nn.functional.cross_entropy(model(inputs), labels).item()
        with open(os.path.join(args.out, "reference.json"), "w") as out:
            json.dump({"losses": losses, "val_loss": val_loss}, out)
        weights = {f"layer{i}.{name}": p for i, layer in enumerate(layers)
                   for name, p in list(layer.named_parameters()) + list(layer.named_buffers())}
        write_safetensors(os.path.join(args.out, "reference.safetensors"), weights)
    print(f"wrote {len(layers)} layers to {args.out}")


if __name__ == "__main__":
    main()
