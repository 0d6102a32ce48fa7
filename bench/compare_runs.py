#!/usr/bin/env python3
"""Compares pipetrain run folders step by step: each run's metrics.jsonl losses and gradient
norms (and, with --weights, checkpoint/model.safetensors element by element) against the first
run's: |a - b| <= max(rtol |b|, atol). Prints one line per run and exits 1 if
any is outside. Used by bench/gpu_check.sh (float64 proofs on a GPU, bfloat16 bounds).
  python3 bench/compare_runs.py --rtol 1e-9 --weights REF RUN [RUN ...]
"""
import argparse, json, struct, sys

import numpy as np

DTYPES = {"F64": np.float64, "F32": np.float32, "BF16": None, "I64": np.int64}


def metrics(run):
    with open(f"{run}/metrics.jsonl") as f:
        return [json.loads(line) for line in f if '"loss"' in line]


def tensors(run):  # safetensors: 8-byte header length, JSON header, raw little-endian data
    with open(f"{run}/checkpoint/model.safetensors", "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header, body = json.loads(data[8 : 8 + n]), data[8 + n :]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(body[begin:end], dtype=DTYPES[entry["dtype"]]).astype(np.float64)
    return out


def worst(a, b, rtol, atol):
    """The largest |a - b| / max(|b|, atol / rtol): <= rtol exactly when |a - b| <= max(rtol |b|,
    atol) everywhere (values near zero, like the attention key bias Adam moves by ~1e-13, are
    held to the absolute bound)."""
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), atol / rtol))) if len(a) else 0.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--rtol", type=float, required=True)
    parser.add_argument("--atol", type=float, default=1e-12)
    parser.add_argument("--weights", action="store_true")
    parser.add_argument("--steps-from", type=int, default=1, help="compare steps >= this")
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    reference, failed = args.runs[0], False
    ref = {r["step"]: r for r in metrics(reference) if r["step"] >= args.steps_from}
    ref_weights = tensors(reference) if args.weights else {}
    for run in args.runs[1:]:
        got = {r["step"]: r for r in metrics(run) if r["step"] >= args.steps_from}
        if sorted(got) != sorted(ref):
            print(f"FAIL {args.label} {run}: steps {sorted(got)} vs {sorted(ref)}")
            failed = True
            continue
        diffs = {}
        for key in ("loss", "grad_norm"):
            a = np.array([got[s][key] for s in sorted(ref)])
            b = np.array([ref[s][key] for s in sorted(ref)])
            diffs[key] = worst(a, b, args.rtol, args.atol)
        if args.weights:
            w = tensors(run)
            diffs["weights"] = max(worst(w[k], v, args.rtol, args.atol) for k, v in ref_weights.items())
        ok = all(d <= args.rtol for d in diffs.values())
        failed |= not ok
        shown = ", ".join(f"{k} {v:.2e}" for k, v in diffs.items())
        print(f"{'PASS' if ok else 'FAIL'} {args.label} {run} vs {reference}: max relative {shown} (bound {args.rtol:g})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
