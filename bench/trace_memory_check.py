#!/usr/bin/env python3
"""Checks a pipeline run's per-action memory (trace.json) against its per-step peaks
(metrics.jsonl): every traced action's peak is at least what it left live, and each logged
step's mem_peak_mb on each rank is its highest action's peak (runtime::MemoryWatch; on a GPU
the caching allocator's windows folded into the step's peak, CUDA graphs' pools counted in both).
Prints one PASS or FAIL line per run and exits 1 on a FAIL. Used by bench/gpu_check.sh.
  python3 bench/trace_memory_check.py RUN [RUN ...]
"""
import json, sys


def check(run):
    with open(f"{run}/trace.json") as f:
        events = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X" and "memory_peak_mib" in e["args"]]
    if not events:
        return f"FAIL {run}: trace.json has no action memory"
    highest = {}
    for e in events:
        args = e["args"]
        if args["memory_peak_mib"] < args["memory_live_mib"]:
            return f"FAIL {run}: {e['name']} peaked at {args['memory_peak_mib']} MiB below its live {args['memory_live_mib']}"
        key = (args["step"], e["pid"])
        highest[key] = max(highest.get(key, 0.0), args["memory_peak_mib"])
    checked, worst = 0, 0.0
    with open(f"{run}/metrics.jsonl") as f:
        for record in map(json.loads, f):
            if "mem_peak_mb" not in record:
                continue
            for rank, peak in enumerate(record["mem_peak_mb"]):
                action = highest.get((record["step"] - 1, rank))
                if action is None:  # past the traced steps
                    continue
                checked += 1
                worst = max(worst, abs(peak - action))
    if checked == 0:
        return f"FAIL {run}: no logged step was traced"
    verdict = "PASS" if worst <= 1e-6 else "FAIL"
    return f"{verdict} {run}: {checked} step peaks against their actions' highest, largest difference {worst:.6f} MiB"


def main():
    lines = [check(run) for run in sys.argv[1:]]
    print("\n".join(lines))
    sys.exit(1 if any(line.startswith("FAIL") for line in lines) else 0)


if __name__ == "__main__":
    main()
