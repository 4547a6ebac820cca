#!/usr/bin/env python3
"""Peak allocated memory: dtsim's prediction against torch's own figure.

    .venv/bin/python bench/torch_xcheck/memory.py --dtsim build/ci/cli/dtsim [--out bench/results/torch_xcheck.md]

1. A one-rank torch.profiler trace of a small transformer (from_trace.py's
   profile, profile_memory=True, no process group): what a user brings.
2. torch itself runs each case on this machine (gloo) under torch.profiler
   with profile_memory=True; `dtsim import --format json` reads each rank's
   trace and gives each step's peak of the [memory] events' "Total Allocated"
   (every tensor torch's CPU allocator holds: parameters, gradients, DDP's
   buckets, activations, the optimizer's state, the batch).
3. `dtsim simulate --from-trace` predicts the same case from the one-rank
   profile; its peak memory is compared with torch's (the larger rank's
   median over the profiled steps).

Issue 15's target: within 5 %. Memory needs no quiet machine: it does not drift.
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

from dtsim_run import publish
from from_trace import dtsim_predict, profile_one_rank
from steptime import build_model, model_input_shape, train_step

STEPS = 4  # profiled from the model's construction on; the median over them
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# name -> (ranks, torch wrapper arguments, dtsim strategy and --set knobs)
CASES = {
    "DDP 1 rank": (1, {}, ["ddp"]),
    "DDP 2 ranks, bucket 25 MiB": (2, {}, ["ddp"]),
    "DDP 2 ranks, gradient_as_bucket_view": (2, {"gradient_as_bucket_view": True},
                                             ["ddp", "gradient_as_bucket_view=true"]),
    "FSDP FULL_SHARD, one unit": (2, {"fsdp": "FULL_SHARD"}, ["fsdp", "auto_wrap_policy=none"]),
    "FSDP2, fully_shard(model)": (2, {"fsdp2": True}, ["fsdp2", "units=none"]),
}


def worker(rank: int, world: int, init: str, spec: tuple, batch: int, kwargs: dict, out_dir: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(1)
    path = os.path.join(out_dir, f"rank{rank}.pt.trace.json")
    # torch's CPU allocator counts "Total Allocated" only while memory is
    # profiled: the profile starts before the model exists, so that the
    # parameters, DDP's buckets and the optimizer's state are in the total.
    # A schedule active from the start marks each step (ProfilerStep#N); step
    # 0 holds the model's construction too, and the median leaves it out.
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                 schedule=schedule(wait=0, warmup=0, active=STEPS, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        kwargs = dict(kwargs)
        sharding = kwargs.pop("fsdp", None)
        if kwargs.pop("fsdp2", False):
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard

            model = build_model(spec)
            fully_shard(model, mesh=init_device_mesh("cpu", (world,)))
        elif sharding:
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy

            model = FSDP(build_model(spec), sharding_strategy=getattr(ShardingStrategy, sharding),
                         device_id=torch.device("cpu"))
        else:
            model = DDP(build_model(spec), **kwargs)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        loss_fn = torch.nn.MSELoss()
        x = torch.randn(*model_input_shape(spec, batch))
        y = torch.randn(*model_input_shape(spec, batch))
        for _ in range(STEPS):
            train_step(model, opt, loss_fn, x, y)
            prof.step()
    dist.destroy_process_group()


def torch_peak(dtsim: str, spec: tuple, batch: int, ranks: int, kwargs: dict, d: str) -> tuple[float, list[float]]:
    """torch's peak allocated bytes: the larger rank's median over the profiled steps, and every step's."""
    import torch.multiprocessing as mp

    out = os.path.join(d, "traces")
    os.makedirs(out, exist_ok=True)
    mp.spawn(worker, args=(ranks, "file://" + os.path.join(d, "store"), spec, batch, kwargs, out), nprocs=ranks)
    r = subprocess.run([dtsim, "import", out, "--format", "json"], check=True, capture_output=True, text=True)
    steps = json.loads(r.stdout)["steps"]
    by_rank: dict[int, list[float]] = {}
    for s in steps:
        if "peak_allocated_bytes" in s:
            by_rank.setdefault(s["rank"], []).append(s["peak_allocated_bytes"])
    if not by_rank:
        raise RuntimeError(f"dtsim import found no [memory] events in {out}")
    return max(statistics.median(v) for v in by_rank.values()), [x for v in by_rank.values() for x in v]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtsim", default=os.path.join(ROOT, "build", "ci", "cli", "dtsim"))
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8, help="samples per rank")
    ap.add_argument("--out", help="append the table to this markdown file")
    a = ap.parse_args()
    if not os.access(a.dtsim, os.X_OK):
        print(f"memory.py: {a.dtsim} is not an executable dtsim; build it first", file=sys.stderr)
        return 2
    import torch

    spec = ("transformer", a.layers, a.d_model, a.heads, a.seq)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        print("torch: profiling one rank", file=sys.stderr)
        profile_dir = os.path.join(d, "profile")
        os.makedirs(profile_dir)
        trace = profile_one_rank(spec, a.batch, profile_dir)
        for name, (ranks, kwargs, knobs) in CASES.items():
            print(f"torch: {name}", file=sys.stderr)
            with tempfile.TemporaryDirectory() as cd:
                measured, every = torch_peak(a.dtsim, spec, a.batch, ranks, kwargs, cd)
            strategy, *sets = knobs
            # Memory does not depend on the hardware's speed: any preset prices it.
            predicted = dtsim_predict(a.dtsim, trace, "h100-sxm", ranks, sets, a.batch, None, strategy)
            rows.append((name, ranks, measured, every, predicted))
    mib = 1024 * 1024
    lines = [f"## {datetime.date.today()}: peak allocated memory, `simulate --from-trace` against torch "
             f"{torch.__version__}'s own [memory] events (transformer {a.layers} x d_model {a.d_model}, seq {a.seq}, "
             f"batch {a.batch} per rank, SGD, fp32, gloo)", "",
             f"Machine: {platform.node()} ({os.cpu_count()} cores). torch: each case run under torch.profiler "
             f"(profile_memory=True) from the model's construction on, so that every tensor counts, {STEPS} steps per rank; `dtsim import` gives each step's peak of "
             "\"Total Allocated\"; the larger rank's median is compared. dtsim: the one-rank profile, "
             "`simulate --from-trace` with the case's strategy.", "",
             "| case | ranks | torch peak (MiB) | torch's steps (MiB) | dtsim peak (MiB) | error | dtsim's largest parts |",
             "|---|---:|---:|---:|---:|---:|---|"]
    errors = []
    for name, ranks, measured, every, predicted in rows:
        peak = predicted["peak_memory_bytes"]
        err = peak / measured - 1
        errors.append(abs(err))
        parts = sorted(predicted.get("memory", {}).items(), key=lambda kv: -kv[1])[:4]
        lines.append(f"| {name} | {ranks} | {measured / mib:.1f} | "
                     f"{min(every) / mib:.1f}-{max(every) / mib:.1f} | {peak / mib:.1f} | {err * 100:+.1f} % | "
                     + ", ".join(f"{k} {v / mib:.1f}" for k, v in parts) + " |")
    lines += ["", f"Median |error| {statistics.median(errors) * 100:.1f} %, largest {max(errors) * 100:.1f} % "
                  "(target: within 5 %)."]
    publish(lines, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
