#!/usr/bin/env python3
"""torchaudio's batched rnnt_loss beside pipetrain's sample-wise loss (bench/gpu_check.sh): the
same joint network (tanh(enc + pred) -> Linear(J, V)) over the whole padded batch, rnnt_loss
(fused log-softmax), backward to the encoder and predictor outputs and the joint's weights; peak
GPU memory (CUDA caching allocator) and time per batch size, largest first that fits.
  python3 bench/transducer_torchaudio.py --batches 8,16,32,64 --frames 1000 --labels 100 --vocab 1024 --joint 512
"""
import argparse, json, sys, time

import torch
import torchaudio.functional as F


def run(batch, frames, labels, vocab, joint, device):
    torch.manual_seed(0)
    enc = (0.5 * torch.randn(batch, frames, joint, device=device)).requires_grad_()
    pred = (0.5 * torch.randn(batch, labels + 1, joint, device=device)).requires_grad_()
    targets = torch.randint(1, vocab, (batch, labels), device=device, dtype=torch.int32)
    lengths = torch.full((batch,), frames, device=device, dtype=torch.int32)
    label_lengths = torch.full((batch,), labels, device=device, dtype=torch.int32)
    output = torch.nn.Linear(joint, vocab).to(device)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    logits = output(torch.tanh(enc.unsqueeze(2) + pred.unsqueeze(1)))
    loss = F.rnnt_loss(logits, targets, lengths, label_lengths, blank=0, reduction="mean")
    loss.backward()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return {"mode": "torchaudio rnnt_loss", "batch": batch, "peak_gb": torch.cuda.max_memory_allocated() / 1e9,
            "seconds": seconds, "ms_per_utterance": 1e3 * seconds / batch, "loss": loss.item()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", default="8,16,32,64")
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--labels", type=int, default=100)
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--joint", type=int, default=512)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("transducer_torchaudio: needs a GPU (torch sees none)", file=sys.stderr)
        sys.exit(2)
    for batch in [int(b) for b in args.batches.split(",")]:
        try:
            run(batch, args.frames, args.labels, args.vocab, args.joint, "cuda")  # warm-up
            print("RESULT " + json.dumps(run(batch, args.frames, args.labels, args.vocab, args.joint, "cuda")), flush=True)
        except torch.OutOfMemoryError:
            print(f"transducer_torchaudio: batch {batch} does not fit", file=sys.stderr)
            break
        finally:
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
