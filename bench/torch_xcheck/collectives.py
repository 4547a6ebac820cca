#!/usr/bin/env python3
"""Time torch.distributed's own gloo collectives and compare them with dtsim's calibrations.

    .venv/bin/python bench/torch_xcheck/collectives.py --dtsim build/ci/cli/dtsim [--out FILE.md]

Needs the venv of scripts/make-venv.sh (torch from PyPI, gloo built in) and a
built dtsim; never builds. In one run, on this machine:

1. torch: 2 processes, backend "gloo", one intra-op thread each (as dtsim's
   ranks run one BLAS thread). For every size of a x2 sweep, 1 KiB to the
   maximum, it times the calls DDP and FSDP make: all_reduce (fp32 and fp16,
   in place, as DDP's buckets and the fp16 hook), all_gather_into_tensor,
   reduce_scatter_tensor and broadcast. Each sample starts after a 64 MiB
   cache-evicting pass and a barrier, as dtsim's benchmark does; the time is the
   slower rank's; the figure is the mean (dtsim's calibration points are means).
2. dtsim: `mpirun -np 2 dtsim calibrate --backend gloo` and `--backend cpu` (MPI).
3. It prints, per collective and size, torch's time, dtsim-gloo's and dtsim-MPI's
   and their ratios to torch, and the median |error| of each calibration
   against torch.

Sizes are nccl-tests' S: the whole buffer for all_reduce, reduce_scatter and
broadcast, the gathered output for all_gather.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

from dtsim_run import calibrate, compilers_running, publish

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KINDS = ["allreduce", "allreduce_fp16", "allgather", "reduce_scatter", "broadcast"]


def torch_worker(rank: int, world: int, init: str, sizes: list[int], budget_s: float, out: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    flush = torch.ones(16 << 20)  # 64 MiB
    results: dict[str, dict[int, float]] = {k: {} for k in KINDS}

    def call(kind: str, S: int):
        if kind == "allreduce":
            t = torch.zeros(S // 4)
            return lambda: dist.all_reduce(t)
        if kind == "allreduce_fp16":
            t = torch.zeros(max(1, S // 2), dtype=torch.float16)
            return lambda: dist.all_reduce(t)
        if kind == "allgather":
            out_t = torch.zeros(S // 4)
            inp = torch.zeros(S // 4 // world)
            return lambda: dist.all_gather_into_tensor(out_t, inp)
        if kind == "reduce_scatter":
            inp = torch.zeros(S // 4)
            out_t = torch.zeros(S // 4 // world)
            return lambda: dist.reduce_scatter_tensor(out_t, inp)
        t = torch.zeros(S // 4)
        return lambda: dist.broadcast(t, 0)

    for kind in KINDS:
        for S in sizes:
            fn = call(kind, S)
            fn()  # warm-up (and connection set-up)
            samples: list[float] = []
            start = time.perf_counter()
            while True:
                flush.mul_(1.0)  # read and write 64 MiB: the collective starts from cold caches
                dist.barrier()
                t0 = time.perf_counter()
                fn()
                local = torch.tensor([time.perf_counter() - t0, time.perf_counter() - start], dtype=torch.float64)
                dist.all_reduce(local, op=dist.ReduceOp.MAX)
                samples.append(local[0].item() * 1e6)
                if len(samples) >= 5 and local[1].item() >= budget_s or len(samples) >= 100:
                    break
            results[kind][S] = statistics.fmean(samples)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({k: {str(s): v for s, v in d.items()} for k, d in results.items()}, f)
    dist.destroy_process_group()


def measure_torch(sizes: list[int], budget_s: float) -> dict[str, dict[int, float]]:
    import torch
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "torch.json")
        mp.spawn(torch_worker, args=(2, "file://" + os.path.join(d, "store"), sizes, budget_s, out), nprocs=2)
        with open(out) as f:
            raw = json.load(f)
    print(f"torch {torch.__version__}: measured {len(sizes)} sizes x {len(KINDS)} calls", file=sys.stderr)
    return {k: {int(s): v for s, v in d.items()} for k, d in raw.items()}


def points(cal: dict, kind: str, dtype: str = "fp32") -> dict[int, float]:
    for c in cal["collectives"]:
        if c["kind"] == kind and c.get("group_size", 0) == 2 and c.get("dtype", "fp32") == dtype:
            return {int(size): float(us) for size, us in c.get("points_size_bytes_time_us", [])}
    return {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtsim", default=os.path.join(ROOT, "build", "ci", "cli", "dtsim"))
    ap.add_argument("--quick", action="store_true",
                    help="dtsim's quick calibrations (1 KiB to 1 MiB by 4) and torch at those sizes")
    ap.add_argument("--out", help="append the table to this markdown file")
    a = ap.parse_args()
    if not os.access(a.dtsim, os.X_OK):
        print(f"collectives.py: {a.dtsim} is not an executable dtsim; build it first", file=sys.stderr)
        return 2
    busy = compilers_running()
    started = time.time()
    with tempfile.TemporaryDirectory() as d:
        gloo = calibrate(a.dtsim, "gloo", d, a.quick)
        mpi = calibrate(a.dtsim, "cpu", d, a.quick)
    # torch at the sizes dtsim measured, with dtsim's time budget per size (calibrate_cpu.cpp's repeat_policy).
    sizes = sorted({s for kind in ("allreduce", "allgather", "reduce_scatter", "broadcast") for s in points(gloo, kind)})
    measured = measure_torch(sizes, 0.02 if a.quick else 0.15)

    lines = [f"## {datetime.date.today()}: torch {__import__('torch').__version__} gloo against dtsim's calibrations",
             "",
             f"Machine: {platform.node()} ({os.cpu_count()} cores). Compilers running at the start: {busy}. "
             f"Run time {time.time() - started:.0f} s{' (--quick)' if a.quick else ''}. Times in microseconds (mean of the "
             "samples, slower rank).",
             "Ratios are dtsim / torch. `allreduce_fp16` is compared with the calibration's fp16 allreduce curve "
             "(the MPI calibration's fp16 allreduce sums half values in float).",
             ""]
    summary = []
    for kind in KINDS:
        dkind, dtype = ("allreduce", "fp16") if kind == "allreduce_fp16" else (kind, "fp32")
        g, m = points(gloo, dkind, dtype), points(mpi, dkind, dtype)
        lines += [f"### {kind}", "", "| S (B) | torch | dtsim gloo | ratio | dtsim MPI | ratio |", "|---:|---:|---:|---:|---:|---:|"]
        errs_g, errs_m = [], []
        for S in sizes:
            t = measured[kind].get(S) if S in g else None
            tg, tm = g.get(S), m.get(S)
            if t is None or tg is None or tm is None:
                continue
            errs_g.append(abs(tg / t - 1))
            errs_m.append(abs(tm / t - 1))
            lines.append(f"| {S} | {t:.1f} | {tg:.1f} | {tg / t:.2f} | {tm:.1f} | {tm / t:.2f} |")
        if errs_g:
            summary.append((kind, statistics.median(errs_g), statistics.median(errs_m), len(errs_g)))
        lines.append("")
    lines += ["### Median |error| against torch", "", "| call | sizes | dtsim gloo | dtsim MPI |", "|---|---:|---:|---:|"]
    for kind, eg, em, n in summary:
        lines.append(f"| {kind} | {n} | {eg * 100:.1f} % | {em * 100:.1f} % |")
    publish(lines, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
