#!/usr/bin/env python3
"""Where torch's DDP step goes, rank by rank: profiles 2-rank DDP (gloo) of an MLP for each bucket size and prints,
for every profiled step and rank, the forward and backward GEMM time, when backward ended, the allreduces (count,
summed duration, when the last ended) and the tail from the end of backward to the end of the last allreduce.

    .venv/bin/python bench/torch_xcheck/profile_buckets.py [--model 8x2048] [--buckets 1,25,100] [--runs 2]
                                                          [--trace-dir DIR] [--out FILE.md]

Same model, step and settings as steptime.py (nn.Sequential of Linear+ReLU, MSELoss, SGD, batch 64 per rank, one
intra-op thread, zero_grad(set_to_none=True)). Five unprofiled steps, then torch.profiler over four (one warm-up).
The traces stay in --trace-dir (`dtsim import DIR/b1` reads them) when it is given.
"""
from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import platform
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtsim_run import compilers_running, publish  # noqa: E402
from steptime import build_model, train_step  # noqa: E402


def worker(rank: int, world: int, init: str, layers: int, width: int, batch: int, bucket: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(1)
    model = DDP(build_model(("mlp", layers, width)), bucket_cap_mb=bucket)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.MSELoss()
    x, y = torch.randn(batch, width), torch.randn(batch, width)
    for _ in range(5):
        dist.barrier()
        train_step(model, opt, loss_fn, x, y)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=4),
                 on_trace_ready=tensorboard_trace_handler(out, worker_name=f"rank{rank}")) as p:
        for _ in range(5):
            dist.barrier()
            train_step(model, opt, loss_fn, x, y)
            p.step()
    dist.destroy_process_group()


def summarize(trace: str) -> list[dict]:
    """One row per ProfilerStep of one rank's trace (times in ms, from the step's start)."""
    with open(trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    rows = []
    for s in sorted((e for e in events if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"]):
        t0, t1 = s["ts"], s["ts"] + s["dur"]
        inside = [e for e in events if t0 <= e["ts"] <= t1]
        bwd = [e for e in inside if e["name"] == "AddmmBackward0"]
        fwd = [e for e in inside if e["name"] == "aten::addmm"]
        ar = [e for e in inside if e["name"] == "gloo:all_reduce"]
        if not bwd or not ar:
            continue
        bwd_end = max(e["ts"] + e["dur"] for e in bwd) - t0
        ar_end = max(e["ts"] + e["dur"] for e in ar) - t0
        rows.append({"step": s["name"], "step_ms": s["dur"] / 1e3, "fwd_ms": sum(e["dur"] for e in fwd) / 1e3,
                     "bwd_ms": sum(e["dur"] for e in bwd) / 1e3, "bwd_end_ms": bwd_end / 1e3, "allreduces": len(ar),
                     "ar_sum_ms": sum(e["dur"] for e in ar) / 1e3, "ar_end_ms": ar_end / 1e3,
                     "tail_ms": (ar_end - bwd_end) / 1e3})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="8x2048", help="LxW: L x (Linear(W, W), ReLU)")
    ap.add_argument("--batch", type=int, default=64, help="samples per rank")
    ap.add_argument("--buckets", default="1,25,100", help="bucket_cap_mb values, comma-separated")
    ap.add_argument("--runs", type=int, default=2, help="torch runs per bucket size")
    ap.add_argument("--trace-dir", help="keep the traces here (DIR/b<cap>/run<k>)")
    ap.add_argument("--out", help="append the table to this markdown file")
    a = ap.parse_args()
    try:
        layers, width = (int(v) for v in a.model.split("x"))
        buckets = [int(v) for v in a.buckets.split(",")]
        if min(layers, width, a.runs) <= 0 or not buckets or min(buckets) <= 0:
            raise ValueError
    except ValueError:
        print(f"profile_buckets.py: --model {a.model!r} / --buckets {a.buckets!r} / --runs {a.runs}: expected LxW, "
              "positive integers comma-separated, and at least one run", file=sys.stderr)
        return 2
    import torch
    import torch.multiprocessing as mp

    busy = compilers_running()
    lines = [f"## {datetime.date.today()}: torch {torch.__version__} DDP, rank by rank (mlp-{a.model}, batch "
             f"{a.batch} per rank, 2 ranks, gloo)", "",
             f"Machine: {platform.node()} ({os.cpu_count()} cores). Compilers running at the start: {busy}. "
             "Times in ms from each rank's step start; tail = last allreduce's end minus backward's end.", "",
             "| bucket | run | step | rank | step (ms) | forward GEMMs | backward GEMMs | backward ends | allreduces "
             "| their sum | last ends | tail |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as scratch:
        root = a.trace_dir or scratch
        for run in range(1, a.runs + 1):
            for bucket in buckets:
                out = os.path.join(root, f"b{bucket}", f"run{run}")
                os.makedirs(out, exist_ok=True)
                print(f"torch: bucket {bucket} MiB (run {run})", file=sys.stderr)
                with tempfile.TemporaryDirectory() as d:
                    try:
                        mp.spawn(worker, args=(2, "file://" + os.path.join(d, "store"), layers, width, a.batch,
                                               bucket, out), nprocs=2)
                    except mp.ProcessExitedException:
                        if len(glob.glob(os.path.join(out, "rank*.json"))) < 2:
                            raise  # gloo's teardown aborts now and then after the traces are written
                for rank in (0, 1):
                    (trace,) = glob.glob(os.path.join(out, f"rank{rank}.*.json"))
                    for r in summarize(trace):
                        lines.append(f"| {bucket} | {run} | {r['step']} | {rank} | {r['step_ms']:.1f} | "
                                     f"{r['fwd_ms']:.1f} | {r['bwd_ms']:.1f} | {r['bwd_end_ms']:.1f} | "
                                     f"{r['allreduces']} | {r['ar_sum_ms']:.1f} | {r['ar_end_ms']:.1f} | "
                                     f"{r['tail_ms']:.1f} |")
    publish(lines, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
