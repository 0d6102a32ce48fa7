#!/usr/bin/env python3
"""Plain PyTorch baseline: trains pipetrain's GPT in one process on random tokens and reports the
median step time, tokens/s, MFU and peak memory, to set beside pipetrain's numbers on a GPU.

Matched to pipetrain's default config (src/model/gpt.cpp, src/core/config.h, src/train/optim.cpp):
- model: token + learned position embedding; pre-LayerNorm blocks x + attn_out(SDPA(qkv(ln1 x)))
  (causal; qkv one Linear with bias, split [3, heads, head_dim]), h + fc_out(gelu(fc(ln2 h))) (fc 4d,
  exact GELU); final ln_f; the head is the token embedding's weight (tied); no dropout.
- init: normal std 0.02, attn_out and fc_out 0.02/sqrt(2 layers), biases 0, LayerNorm 1/0, drawn
  from pipetrain's per-layer generators (train.seed 1234 and the layer index): the float32 initial
  weights are pipetrain's bit for bit (checked against a learning-rate-0 run's model.safetensors).
- loss: mean cross-entropy over all batch x context tokens on the full logits (loss_chunk_tokens 0).
- optimizer: AdamW, lr 3e-3 with 50 warm-up steps then cosine to 3e-4 over train.steps 800,
  betas (0.9, 0.99), eps 1e-8, weight decay 0.01 on every parameter (one group: embeddings,
  biases and LayerNorm gains too), global gradient-norm clip 1.0 (scale max/(norm + 1e-6)).
Not matched: pipetrain splits a step into train.microbatches (default 8; here --microbatches,
default 1); it reads the loss and the gradient norm (float64) on the host inside a step, this never
synchronizes inside one; libtorch's AdamW loops over the parameters, here torch.optim.AdamW's
default foreach kernels; --dtype bfloat16 is autocast with float32 weights, gradients, optimizer
state and loss, but unlike pipetrain's bfloat16 it keeps the residual stream between blocks float32.

FLOPs per token (PaLM, appendix B): 6 N + 12 L d T, N = all parameters but the position embedding
(the tied token embedding counted once, as the head's matmul), L layers, d = d_model, T = context;
attention counted in full, not halved for the causal mask. MFU = FLOPs per step / (median step
time x --peak-tflops); give float32 runs the card's float32 peak.
  .venv/bin/python3 bench/gpt2_pytorch.py --batches 2,4,16 --compile --json gpt2.json
"""
import argparse, gc, json, math, statistics, sys, time

import torch
import torch.nn.functional as F
from torch import nn

INIT_STD, SEED, MASK64 = 0.02, 1234, (1 << 64) - 1
LR, MIN_LR, WARMUP, SCHEDULE_STEPS = 3e-3, 3e-4, 50, 800  # train.lr, min_lr, warmup_steps, steps
BETAS, EPS, WEIGHT_DECAY, GRAD_CLIP = (0.9, 0.99), 1e-8, 0.01, 1.0


def layer_generator(seed, layer):  # gpt.cpp's layer_generator: splitmix of (seed, layer)
    z = (seed * 0x9E3779B97F4A7C15 + (layer + 1) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 30)) * 0x94D049BB133111EB) & MASK64
    return torch.Generator().manual_seed(z ^ (z >> 31))


def normal_linear(linear, std, generator):
    linear.weight.normal_(0.0, std, generator=generator), linear.bias.zero_()
    return linear


class Block(nn.Module):
    def __init__(self, d, heads, layers, generator):
        super().__init__()
        self.heads, residual_std = heads, INIT_STD / math.sqrt(2.0 * layers)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        # Drawn in pipetrain's order: qkv, attn_out, fc, fc_out.
        self.qkv = normal_linear(nn.Linear(d, 3 * d), INIT_STD, generator)
        self.attn_out = normal_linear(nn.Linear(d, d), residual_std, generator)
        self.fc = normal_linear(nn.Linear(d, 4 * d), INIT_STD, generator)
        self.fc_out = normal_linear(nn.Linear(4 * d, d), residual_std, generator)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        mixed = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = x + self.attn_out(mixed.transpose(1, 2).reshape(b, t, d))
        return h + self.fc_out(F.gelu(self.fc(self.ln2(h))))


class GPT(nn.Module):
    def __init__(self, vocab, d, heads, layers, context, seed=SEED):
        super().__init__()
        with torch.no_grad():
            g = layer_generator(seed, 0)  # layer 0: the embedding, token weight drawn first
            self.token_weight = nn.Parameter(torch.empty(vocab, d).normal_(0.0, INIT_STD, generator=g))
            self.position_weight = nn.Parameter(torch.empty(context, d).normal_(0.0, INIT_STD, generator=g))
            self.blocks = nn.ModuleList(Block(d, heads, layers, layer_generator(seed, i + 1))
                                        for i in range(layers))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, tokens, targets):
        x = F.embedding(tokens, self.token_weight) + self.position_weight[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.token_weight)
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())  # fp32 loss


def flops_per_token(model, layers, d, context):
    n = sum(p.numel() for p in model.parameters()) - model.position_weight.numel()
    return 6 * n + 12 * layers * d * context


def learning_rate_at(step):  # lr_schedule.cpp with the default train.* values
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    progress = min(1.0, (step - WARMUP) / max(1, SCHEDULE_STEPS - 1 - WARMUP))
    return MIN_LR + 0.5 * (LR - MIN_LR) * (1.0 + math.cos(math.pi * progress))


def measure(args, batch, mode, device):
    cuda, bf16 = device.type == "cuda", args.dtype == "bfloat16"
    gc.collect()  # the last config's model, optimizer state and compiled graphs go first
    torch._dynamo.reset()  # each compile config compiles afresh: no recompiles or dynamic shapes
    if cuda:  # peak memory per config: weights, optimizer state, activations
        torch.cuda.empty_cache(), torch.cuda.reset_peak_memory_stats()
    model = GPT(args.vocab, args.d_model, args.heads, args.layers, args.context).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    run = torch.compile(model) if mode == "compile" else model
    generator = torch.Generator().manual_seed(SEED)
    host = torch.empty(batch, args.context + 1, dtype=torch.long, pin_memory=cuda)
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def step(i):
        # New host-drawn tokens copied over each step (the last copy out of `host` ended at its sync).
        torch.randint(0, args.vocab, host.shape, generator=generator, out=host)
        tokens = host.to(device, non_blocking=True)
        opt.param_groups[0]["lr"] = learning_rate_at(i)  # one group, as in pipetrain
        losses = []
        for rows in tokens.chunk(args.microbatches):  # gradient accumulation, equal microbatches
            with torch.autocast(device.type, torch.bfloat16, enabled=bf16):
                loss = run(rows[:, :-1], rows[:, 1:])
            (loss / args.microbatches).backward()
            losses.append(loss.detach())
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return torch.stack(losses).mean()

    times, losses, start = [], [], time.perf_counter()
    sync()
    profiled = range(args.warmup, args.warmup + args.profile_steps)  # the first timed steps
    for i in range(args.warmup + args.steps):
        if i == args.warmup and args.profile_steps:
            profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU] +
                                              ([torch.profiler.ProfilerActivity.CUDA] if cuda else []))
            profiler.__enter__()
        t0 = time.perf_counter()
        loss = step(i)
        sync()  # the step boundary: the only synchronize
        if args.profile_steps and i == profiled[-1]:
            profiler.__exit__(None, None, None)
            sort = "self_cuda_time_total" if cuda else "self_cpu_time_total"
            print(f"profile of {mode} batch {batch}, {args.profile_steps} step(s):\n" +
                  profiler.key_averages().table(sort_by=sort, row_limit=25, max_name_column_width=70),
                  flush=True)
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())  # already computed: costs no GPU time inside the timed step
        if i + 1 == args.warmup:
            print(f"  warm-up done in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    median = statistics.median(times[args.warmup:])
    tokens = batch * args.context
    flops = flops_per_token(model, args.layers, args.d_model, args.context) * tokens
    return {"mode": mode, "dtype": args.dtype, "device": torch.cuda.get_device_name() if cuda else "cpu",
            "batch": batch, "microbatches": args.microbatches, "context": args.context, "layers": args.layers,
            "d_model": args.d_model, "heads": args.heads, "vocab": args.vocab, "flops_per_step": flops,
            "params": sum(p.numel() for p in model.parameters()),
            "median_ms": median * 1e3, "tokens_per_s": tokens / median, "peak_tflops": args.peak_tflops,
            "mfu": flops / (median * args.peak_tflops * 1e12),
            "peak_mb": torch.cuda.max_memory_allocated() / 2**20 if cuda else None,
            "step_ms": [t * 1e3 for t in times[args.warmup:]], "losses": losses, "torch": torch.__version__}


def row(r):
    peak = "-" if r["peak_mb"] is None else f"{r['peak_mb']:.0f}"
    return (f"{r['mode']:<8}{r['dtype']:<10}{r['batch']:>6}{r['median_ms']:>11.2f}"
            f"{r['tokens_per_s']:>12.0f}{100 * r['mfu']:>8.2f}{peak:>10}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    p.add_argument("--batches", default="2,4,16", type=lambda text: [int(b) for b in text.split(",")],
                   help="sequences per step, one measured config each")
    p.add_argument("--microbatches", type=int, default=1, help="gradient accumulation, as train.microbatches")
    p.add_argument("--context", type=int, default=1024)
    for flag, default in [("--layers", 12), ("--d-model", 768), ("--heads", 12), ("--vocab", 50257)]:
        p.add_argument(flag, type=int, default=default, help="default: the gpt2-small preset")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--compile", action="store_true", help="also measure torch.compile(model)")
    p.add_argument("--compile-batches", type=lambda text: [int(b) for b in text.split(",")],
                   help="the batches measured compiled (default: --batches); each compiles afresh")
    p.add_argument("--profile-steps", type=int, default=0,
                   help="profile this many steps after the warm-up (torch.profiler; they are timed too)")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="for MFU; 989 = H100/H200 dense bf16")
    p.add_argument("--json", help="append one JSON object per measured config")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpt2_pytorch: --device cuda but torch sees no GPU", file=sys.stderr)
        sys.exit(2)
    if min(args.batches) < 1 or args.steps < 1 or args.warmup < 0 or \
            any(b % args.microbatches for b in args.batches + (args.compile_batches or [])):
        p.error("--batches must be > 0, --steps >= 1, --warmup >= 0; --microbatches must divide every batch")
    results = []
    for mode in ["eager"] + (["compile"] if args.compile else []):
        for batch in args.compile_batches or args.batches if mode == "compile" else args.batches:
            print(f"{mode} {args.dtype} batch {batch} x {args.context} on {args.device}", file=sys.stderr)
            try:
                r = measure(args, batch, mode, torch.device(args.device))
            except Exception as e:  # a failed compile or an OOM: say why in one line, go on
                print(f"gpt2_pytorch: {mode} batch {batch} failed: {type(e).__name__}: "
                      f"{(str(e).strip().splitlines() or [''])[0][:200]}", flush=True)
                continue
            results.append(r)
            print(row(r), flush=True)
            if args.json:
                with open(args.json, "a") as f: f.write(json.dumps(r) + "\n")
    print(f"\n{'mode':<8}{'dtype':<10}{'batch':>6}{'median ms':>11}{'tokens/s':>12}{'MFU %':>8}{'peak MB':>10}")
    print("\n".join(row(r) for r in results))


if __name__ == "__main__":
    main()
