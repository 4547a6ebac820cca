#!/usr/bin/env python3
"""torch DDP's bucket allreduces timed inside the step, against the same allreduces alone and a dtsim calibration.

    .venv/bin/python bench/torch_xcheck/bucket_allreduce.py [--caps 1,100,128] [--steps 12] [--hardware CAL.json]
                                                             [--out FILE.md]

Same model and step as steptime.py (mlp-8x2048 by default, nn.Sequential of Linear+ReLU, MSELoss, SGD, batch 64 per
rank, 2 gloo ranks, one intra-op thread, zero_grad(set_to_none=True)). A DDP comm hook wraps torch's own
`allreduce_hook` and records, for every bucket, when it was launched and when its future completed: the allreduce as
the step runs it, beside backward, beside another bucket on gloo's second lane, and waiting for the slower rank.
After the steps, the same processes time `dist.all_reduce` of each bucket size alone (a barrier before each call;
the slower rank's time). With --hardware, the calibration's allreduce at each size (its fp32 points, interpolated
log-log) is printed beside them. bucket_cap_mb=128 on mlp-8x2048 makes one 128 MiB bucket, ready when backward ends,
with nothing beside it: the in-step cost of a large allreduce on its own.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtsim_run import compilers_running, publish  # noqa: E402
from steptime import build_model, spawn_with_retry, train_step  # noqa: E402


def worker(rank: int, world: int, init: str, layers: int, width: int, batch: int, cap: int, steps: int, warmup: int,
           out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(1)
    model = DDP(build_model(("mlp", layers, width)), bucket_cap_mb=cap)
    records: list[tuple[int, float, float]] = []

    def hook(state, bucket):
        launched, nbytes = time.perf_counter(), bucket.buffer().numel() * bucket.buffer().element_size()

        def done(fut):
            records.append((nbytes, launched, time.perf_counter()))
            return fut.value()

        return default_hooks.allreduce_hook(state, bucket).then(done)

    model.register_comm_hook(None, hook)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.MSELoss()
    x, y = torch.randn(batch, width), torch.randn(batch, width)
    in_step: dict[int, list[float]] = {}
    for s in range(steps):
        dist.barrier()
        records.clear()
        train_step(model, opt, loss_fn, x, y)
        if s >= warmup:
            for nbytes, launched, finished in records:
                in_step.setdefault(nbytes, []).append(finished - launched)
    alone: dict[int, float] = {}
    for nbytes in sorted(in_step):
        buf = torch.zeros(nbytes // 4)
        times = []
        for _ in range(max(3, steps - warmup)):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            times.append(t.item())
        alone[nbytes] = statistics.median(times)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"in_step": {str(k): v for k, v in in_step.items()}, "alone": {str(k): v for k, v in alone.items()}},
                      f)
    dist.destroy_process_group()


def calibration_us(cal: dict, nbytes: int) -> float | None:
    """The calibration's fp32 allreduce of 2 ranks at `nbytes`: its points interpolated log-log (None: no curve)."""
    for c in cal.get("collectives", []):
        pts = c.get("points_size_bytes_time_us", [])
        if c.get("kind") == "allreduce" and c.get("dtype", "fp32") == "fp32" and c.get("group_size") == 2 and pts:
            pts = sorted(pts)
            lo = max((p for p in pts if p[0] <= nbytes), default=pts[0])
            hi = min((p for p in pts if p[0] >= nbytes), default=pts[-1])
            if lo[0] == hi[0]:
                return lo[1] * nbytes / lo[0]
            f = math.log(nbytes / lo[0]) / math.log(hi[0] / lo[0])
            return math.exp(math.log(lo[1]) + f * (math.log(hi[1]) - math.log(lo[1])))
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="8x2048", help="the MLP, LxW (8x2048)")
    ap.add_argument("--caps", default="1,100,128", help="bucket_cap_mb values, comma-separated (1,100,128)")
    ap.add_argument("--batch", type=int, default=64, help="samples per rank (64)")
    ap.add_argument("--steps", type=int, default=12, help="steps per cap (12)")
    ap.add_argument("--warmup", type=int, default=4, help="steps left out (4)")
    ap.add_argument("--hardware", help="a dtsim calibration (calibrate --backend gloo) to print beside torch")
    ap.add_argument("--out", help="append the table to this markdown file")
    a = ap.parse_args()
    try:
        layers, width = (int(v) for v in a.model.split("x"))
        caps = [int(v) for v in a.caps.split(",")]
    except ValueError:
        print(f"bucket_allreduce.py: --model {a.model!r} / --caps {a.caps!r}: expected LxW and integers",
              file=sys.stderr)
        return 2
    if a.steps <= a.warmup:
        print("bucket_allreduce.py: --steps must exceed --warmup", file=sys.stderr)
        return 2
    cal = None
    if a.hardware:
        try:
            with open(a.hardware) as f:
                cal = json.load(f)
        except (OSError, ValueError) as e:
            print(f"bucket_allreduce.py: --hardware {a.hardware}: {e}", file=sys.stderr)
            return 2
    import torch

    busy = compilers_running()
    lines = [f"## {datetime.date.today()}: torch {torch.__version__} DDP bucket allreduces in the step and alone "
             f"(mlp-{layers}x{width}, batch {a.batch} per rank, 2 ranks, gloo)", "",
             f"Machine: {platform.node()} ({os.cpu_count()} cores). Compilers running at the start: {busy}. In the "
             f"step: launch to the hook's future done, medians over steps {a.warmup + 1}-{a.steps}, rank 0. Alone: "
             "`dist.all_reduce` of the same size in the same processes after the steps, the slower rank."
             + (f" Calibration: {a.hardware}, log-log between its points." if cal else ""), "",
             "| bucket_cap_mb | bucket (MiB) | buckets of that size a step | in the step (ms) | alone (ms) | "
             "in step / alone |" + (" calibration (ms) |" if cal else ""),
             "|---:|---:|---:|---:|---:|---:|" + ("---:|" if cal else "")]
    for cap in caps:
        print(f"torch: bucket_cap_mb={cap}", file=sys.stderr)
        run = spawn_with_retry(worker, (layers, width, a.batch, cap, a.steps, a.warmup), 2, "times.json")
        for key in sorted(run["in_step"], key=int):
            nbytes, times = int(key), run["in_step"][key]
            step_ms, alone_ms = statistics.median(times) * 1e3, run["alone"][key] * 1e3
            row = (f"| {cap} | {nbytes / 2**20:.1f} | {len(times) // (a.steps - a.warmup)} | {step_ms:.1f} | "
                   f"{alone_ms:.1f} | {step_ms / alone_ms:.2f} |")
            if cal:
                us = calibration_us(cal, nbytes)
                row += f" {us / 1e3:.1f} |" if us else " n/a |"
            lines.append(row)
    publish(lines, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
