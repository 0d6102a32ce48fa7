"""tanh on one CPU core: libtorch's at::tanh against the identity tanh(x) = 2 sigmoid(2x) - 1
that the transducer's joint uses on a CPU (src/loss/joint_network.cpp), as four passes over one
buffer. Prints ns per value (median of 300 calls) and each one's largest error against float64.
  .venv/bin/python3 bench/cpu_tanh.py   (docs/benchmarks.md, "The transducer's joint on a CPU")
"""
import time

import torch

torch.set_num_threads(1)
VALUES = 102 * 42 * 128  # one utterance's joint hidden at examples/speech.toml's full length


def median_ns_per_value(fn, repeats=300):
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return 1e9 * times[len(times) // 2] / VALUES


def identity(x, out):  # the four passes of JointTanh on a CPU
    torch.add(x, x, out=out)
    out.sigmoid_().mul_(2).sub_(1)
    return out


print("| dtype | at::tanh ns/value | 2 sigmoid(2x) - 1 ns/value | speed-up | tanh max error | identity max error |")
print("|---|---|---|---|---|---|")
for dtype in (torch.float32, torch.float64):
    x = torch.randn(VALUES, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2
    exact = torch.tanh(x)
    x = x.to(dtype)
    out = torch.empty_like(x)
    slow = median_ns_per_value(lambda: torch.tanh(x, out=out))
    fast = median_ns_per_value(lambda: identity(x, out))
    tanh_error = (torch.tanh(x).double() - exact).abs().max().item()
    identity_error = (identity(x, out).double() - exact).abs().max().item()
    print(f"| {str(dtype).split('.')[1]} | {slow:.3f} | {fast:.3f} | {slow / fast:.1f}x | "
          f"{tanh_error:.1e} | {identity_error:.1e} |")
