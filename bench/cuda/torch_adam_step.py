"""torch.optim.Adam's step on one GPU: time and extra peak memory, for the
foreach (default on CUDA), fused and for-loop implementations. The reference
for dtsim's optimizer-step cost and for issue 13, item 2 (foreach allocates a
temporary the size of the parameters in step).

Parameters are fp32 (the master weights under mixed precision, or an FSDP
shard), split into tensors like a model's. Each implementation gets fresh
parameters, gradients and one warm-up step (which allocates the states), then
timed steps (CUDA events). Extra peak = max_memory_allocated during a step
minus memory_allocated before it.

  python3 bench/cuda/torch_adam_step.py --out DIR [--params 1e9] [--device cpu --params 1e6]

Prints one JSON object per implementation and writes DIR/torch_adam_step.json.
"""
import argparse
import json
import os
import statistics
import time

import torch


def tensors(total, count, device):
    # Sizes like a transformer's: a few large matrices, some small vectors.
    base = total // count
    sizes = [base] * (count - 1) + [total - base * (count - 1)]
    g = torch.Generator(device="cpu").manual_seed(0)
    ps = []
    for n in sizes:
        p = torch.nn.Parameter(torch.randn(n, generator=g).to(device))
        p.grad = torch.randn(n, generator=g).to(device) * 1e-3
        ps.append(p)
    return ps


def measure(kind, total, count, device, steps):
    ps = tensors(total, count, device)
    kw = {"lr": 1e-4}
    if kind == "foreach":
        kw["foreach"] = True
    elif kind == "fused":
        kw["fused"] = True
    elif kind == "for-loop":
        kw["foreach"] = False
    opt = torch.optim.Adam(ps, **kw)
    opt.step()  # allocates exp_avg and exp_avg_sq
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    times, extra = [], []
    for _ in range(steps):
        if device == "cuda":
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            opt.step()
            stop.record()
            sync()
            times.append(start.elapsed_time(stop) / 1e3)
            extra.append(torch.cuda.max_memory_allocated() - before)
        else:
            t0 = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - t0)
            extra.append(0)
    del opt, ps
    if device == "cuda":
        torch.cuda.empty_cache()
    t = statistics.median(times)
    return {"impl": kind, "params": total, "tensors": count, "step_s": t, "ns_per_param": t / total * 1e9,
            "extra_peak_bytes": max(extra),
            "extra_peak_per_param_bytes": max(extra) / total}


def copy_rate(device, n=1 << 28):
    a = torch.empty(n, dtype=torch.float32, device=device)
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        b.copy_(a)
    stop.record()
    torch.cuda.synchronize()
    return 2 * 4 * n * 10 / (start.elapsed_time(stop) / 1e3)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--params", type=float, default=1e9)
    ap.add_argument("--tensors", type=int, default=200)
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    total = int(a.params)
    res = {"torch": torch.__version__, "device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu",
           "rows": []}
    rate = copy_rate(a.device) if a.device == "cuda" else None
    res["copy_bytes_per_s"] = rate
    for kind in ("foreach", "fused", "for-loop"):
        try:
            row = measure(kind, total, a.tensors, a.device, a.steps)
        except Exception as e:  # fused is CUDA/CPU-version dependent
            row = {"impl": kind, "error": str(e)[:200]}
        if "step_s" in row:
            row["bytes_per_param_at_copy_rate"] = row["step_s"] * rate / total if rate else None
        print(json.dumps(row), flush=True)
        res["rows"].append(row)
    with open(os.path.join(a.out, "torch_adam_step.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
