#!/usr/bin/env python3
"""The oracle of torchaudio_oracle_test.cpp: a random ragged batch (seeded), torchaudio's
rnnt_loss per sample (float32, reduction none, log-softmax fused) and its gradient w.r.t. the
logits of the losses' sum, written as one safetensors file (scripts/export_torchscript.py's writer).
  rnnt_torchaudio.py OUT.safetensors
"""
import os, sys

import torch
import torchaudio.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
from export_torchscript import write_safetensors  # noqa: E402  (the repo's one safetensors writer)

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
write_safetensors(sys.argv[1], tensors)
