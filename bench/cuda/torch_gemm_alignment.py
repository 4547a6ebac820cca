"""cuBLAS GEMM speed by operand alignment, as torch calls it (bf16, nn.Linear's
layouts): the data for dtsim's GEMM alignment class (issue 13 item 9; GPT-2's
50,257-token vocabulary made its lm_head 6x slower than the model said).

For each shape (M, N, K) it times the forward x·Wᵀ and the two backward GEMMs
(dX = dY·W, dW = dYᵀ·X) with CUDA events after warm-up, and records the name
of the kernel cuBLAS picked (torch.profiler), so each figure says which kernel
family ran. Shapes: a 4096³ base with one dimension moved off a multiple of 8
(16 bytes of bf16) or of 64, and the GPT-2 and GPT-2 XL heads at their real
and padded vocabularies.

  python3 bench/cuda/torch_gemm_alignment.py --out DIR [--device cpu --small]

Prints one JSON object per GEMM and writes DIR/torch_gemm_alignment.json.
"""
import argparse
import json
import os

import torch


def shapes(small):
    if small:
        return [("base", 64, 64, 64), ("n_odd", 64, 63, 64)]
    out = [("base", 4096, 4096, 4096)]
    for dim in ("m", "n", "k"):
        for d in (4095, 4097, 4100, 4104, 4112, 4160):
            m, n, k = (d if dim == "m" else 4096, d if dim == "n" else 4096, d if dim == "k" else 4096)
            out.append((f"{dim}={d}", m, n, k))
    for vocab in (50257, 50304):
        out.append((f"gpt2 head vocab {vocab}", 8 * 1024, vocab, 768))
        out.append((f"gpt2-xl head vocab {vocab}", 8 * 1024, vocab, 1600))
    return out


def time_ms(fn, device, reps):
    for _ in range(3):
        fn()
    if device == "cpu":
        import time

        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t0) * 1e3 / reps
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def kernel_name(fn, device):
    if device == "cpu":
        return "cpu"
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return max(names, key=len) if names else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    dtype = torch.bfloat16 if a.device == "cuda" else torch.float32
    g = torch.Generator(device=a.device).manual_seed(0)
    rows = []
    for name, m, n, k in shapes(a.small):
        x = torch.randn(m, k, device=a.device, dtype=dtype, generator=g)
        w = torch.randn(n, k, device=a.device, dtype=dtype, generator=g)
        dy = torch.randn(m, n, device=a.device, dtype=dtype, generator=g)
        gemms = {
            "forward x.Wt": lambda: x @ w.t(),
            "backward dX = dY.W": lambda: dy @ w,
            "backward dW = dYt.X": lambda: dy.t() @ x,
        }
        for which, fn in gemms.items():
            ms = time_ms(fn, a.device, a.reps)
            row = {
                "shape": name,
                "gemm": which,
                "m": m,
                "n": n,
                "k": k,
                "ms": round(ms, 4),
                "tflops": round(2 * m * n * k / ms / 1e9, 1),
                "kernel": kernel_name(fn, a.device),
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
        del x, w, dy
    info = {"device": torch.cuda.get_device_name() if a.device == "cuda" else "cpu", "torch": torch.__version__}
    with open(os.path.join(a.out, "torch_gemm_alignment.json"), "w") as f:
        json.dump({"info": info, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
