"""How far ATen's CPU LayerNorm backward puts the weight's and bias's gradients from float64, for
a bfloat16 input with float32 parameters (what pipetrain's bfloat16 runs on a CPU compute), beside
one rounding of the exact value to bfloat16 (a GPU kernel's, which sums in float32). Prints a
markdown table (docs/benchmarks.md, "LayerNorm's parameter gradients in bfloat16 on the CPU").

    .venv/bin/python bench/layer_norm_cpu_precision.py
"""
import torch


def relative(got, want):
    return ((got.double() - want).norm() / want.norm()).item()


def row(rows, width):
    torch.manual_seed(0)
    x = (torch.randn(rows, width) * 3 + 1).bfloat16()
    upstream = torch.randn(rows, width).bfloat16()  # held exactly by bfloat16
    weight = torch.empty(width).uniform_(0.5, 1.5).requires_grad_()
    bias = torch.empty(width).uniform_(-0.5, 0.5).requires_grad_()
    torch.nn.functional.layer_norm(x.requires_grad_(), (width,), weight, bias).backward(upstream)
    x64 = x.detach().double()
    x_hat = (x64 - x64.mean(1, keepdim=True)) / torch.sqrt(x64.var(1, unbiased=False, keepdim=True) + 1e-5)
    d_weight, d_bias = (upstream.double() * x_hat).sum(0), upstream.double().sum(0)
    return (f"| {rows} x {width} | {100 * relative(weight.grad, d_weight):.2f}% | "
            f"{100 * relative(bias.grad, d_bias):.2f}% | "
            f"{100 * relative(d_weight.bfloat16(), d_weight):.2f}% |")


torch.set_num_threads(1)
print(f"torch {torch.__version__}")
print("| rows x width | weight gradient off (norm) | bias gradient off | one bfloat16 rounding |")
print("|---|---|---|---|")
for shape in ((32, 64), (512, 64), (4096, 768)):
    print(row(*shape))
