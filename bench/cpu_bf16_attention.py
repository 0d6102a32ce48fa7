"""Why bfloat16 is slower than float32 for small GPT models on a CPU: ATen's fused attention (the
kernel `at::scaled_dot_product_attention` picks on a CPU, src/model/attention.cpp) forward and
backward per (batch x heads, context, head width), float32 against bfloat16, and one small
matrix product in each dtype. One thread, the dtypes round-robin, median of the rounds' medians.
  .venv/bin/python3 bench/cpu_bf16_attention.py   (docs/benchmarks.md, "Mixed precision on the CPU")
"""
import statistics
import time

import torch
import torch.nn.functional as F

torch.set_num_threads(1)
DTYPES = (torch.float32, torch.bfloat16)
# (batch, heads, context, head width): the default job's microbatch (4 x 4 heads, T 128, 32
# wide), the tests' shape (T 64, 16 wide), longer contexts, and GPT-2 small's (2 x 12, T 1024, 64).
SHAPES = [(4, 4, 128, 32), (2, 4, 64, 16), (4, 4, 256, 32), (4, 4, 512, 32), (2, 12, 1024, 64)]


def attention_ms(shape, dtype, repeats):
    batch, heads, context, width = shape
    q, k, v = (torch.randn(batch, heads, context, width, dtype=dtype, requires_grad=True) for _ in range(3))
    seed = torch.randn(batch, heads, context, width, dtype=dtype)
    forward, backward = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        middle = time.perf_counter()
        out.backward(seed)
        forward.append(middle - start)
        backward.append(time.perf_counter() - middle)
    return 1e3 * statistics.median(forward), 1e3 * statistics.median(backward)


def product_us(dtype, repeats=2000):
    a, b = torch.randn(32, 16, dtype=dtype), torch.randn(16, 64, dtype=dtype)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - start)
    return 1e6 * statistics.median(times)


def main(rounds=3):
    results = {}
    for _ in range(rounds):
        for shape in SHAPES:
            repeats = 5 if shape[2] >= 1024 else 30
            for dtype in DTYPES:
                attention_ms(shape, dtype, 3)  # warm-up
                results.setdefault((shape, dtype), []).append(attention_ms(shape, dtype, repeats))
        for dtype in DTYPES:
            product_us(dtype, 100)
            results.setdefault(("mm", dtype), []).append(product_us(dtype))
    median = lambda key, i=None: statistics.median(r if i is None else r[i] for r in results[key])
    print("| batch x heads | context | head width | float32 fwd ms | bfloat16 fwd ms | float32 bwd ms "
          "| bfloat16 bwd ms | bwd bf16 / fp32 | bf16 bwd per (batch, head) above fp32, ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for shape in SHAPES:
        batch, heads, context, width = shape
        f32, b16 = (shape, torch.float32), (shape, torch.bfloat16)
        extra = (median(b16, 1) - median(f32, 1)) / (batch * heads)
        print(f"| {batch} x {heads} | {context} | {width} | {median(f32, 0):.3f} | {median(b16, 0):.3f} | "
              f"{median(f32, 1):.3f} | {median(b16, 1):.3f} | {median(b16, 1) / median(f32, 1):.2f}x | {extra:.3f} |")
    print(f"\none [32, 16] x [16, 64] product: float32 {median(('mm', torch.float32)):.1f} us, "
          f"bfloat16 {median(('mm', torch.bfloat16)):.1f} us")


if __name__ == "__main__":
    main()
