#!/usr/bin/env python3
"""The oracle of torchaudio_oracle_test.cpp: a random ragged batch (seeded), torchaudio's
rnnt_loss per sample (float32, reduction none, log-softmax fused) and its gradient w.r.t. the
logits of the losses' sum, written as one safetensors file (by hand: no safetensors package).
  rnnt_torchaudio.py OUT.safetensors
"""
import json, struct, sys

import numpy as np
import torch
import torchaudio.functional as F

generator = torch.Generator().manual_seed(2026)
B, T, U, V = 5, 23, 6, 11
logit_lengths = torch.tensor([23, 17, 9, 23, 4], dtype=torch.int32)
target_lengths = torch.tensor([6, 3, 5, 0, 2], dtype=torch.int32)
logits = (3 * torch.randn(B, T, U + 1, V, generator=generator)).requires_grad_(True)
targets = torch.randint(1, V, (B, U), generator=generator, dtype=torch.int32)
losses = F.rnnt_loss(logits, targets, logit_lengths, target_lengths, blank=0, reduction="none")
losses.sum().backward()

tensors = {"logits": logits.detach(), "targets": targets.long(), "logit_lengths": logit_lengths.long(),
           "target_lengths": target_lengths.long(), "losses": losses.detach(), "grads": logits.grad}
names = {torch.float32: "F32", torch.int64: "I64"}
header, chunks, offset = {}, [], 0
for name, tensor in tensors.items():
    data = tensor.contiguous().numpy().tobytes()
    header[name] = {"dtype": names[tensor.dtype], "shape": list(tensor.shape),
                    "data_offsets": [offset, offset + len(data)]}
    chunks.append(data)
    offset += len(data)
encoded = json.dumps(header).encode()
encoded += b" " * (-len(encoded) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(encoded)) + encoded + b"".join(chunks))
