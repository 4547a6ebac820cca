#!/usr/bin/env python3
"""Where a DDP step under the fp16 compression hook goes, in torch and in dtsim, part by part, on one calibration.

    .venv/bin/python bench/torch_xcheck/hook_breakdown.py --dtsim build/ci/cli/dtsim --hardware CAL.json
                                                          [--model 8x2048] [--cap 25] [--steps 12] [--out FILE.md]

CAL.json: a gloo calibration of this machine with torch's GEMM points (steptime.py --keep-calibration). Same model
and settings as steptime.py's "fp16 hook" and "bucket 25 MiB" cases: nn.Sequential of Linear+ReLU, batch 64 per
rank, SGD, MSELoss, fp32, 2 ranks over gloo, one intra-op thread, zero_grad(set_to_none=True).

torch runs two hooks, each timed from inside, unprofiled:

- allreduce: torch's own `allreduce_hook` (what DDP runs without a hook), launch to its future done;
- fp16: the body of torch's `fp16_compress_hook` (`buffer.to(float16).div_(world)`, an async allreduce, a `then`
  callback that copies the result back into the bucket), with each part timed: the compression on the autograd
  thread, the allreduce from launch to done, and the callback, with the thread it ran on.

dtsim (`simulate --trace`, rank 0) gives the same parts: its compression passes, its allreduces, its decompress
passes. torch's figures are medians over the steps after warm-up of the per-step sums, the mean of the two ranks.
"""
from __future__ import annotations

import datetime
import json
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtsim_run import breakdown_args, compilers_running, machine_line, publish, rank_medians, simulated_step  # noqa: E402
from steptime import build_model, ddp_knobs_for, spawn_with_retry  # noqa: E402

HOOKS = {"allreduce": "comm_hook=allreduce", "fp16": "comm_hook=fp16_compress"}


def worker(rank: int, world: int, init: str, layers: int, width: int, batch: int, cap: int, kind: str, steps: int,
           out: str) -> None:
    import resource

    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(1)
    model = DDP(build_model(("mlp", layers, width)), bucket_cap_mb=cap)
    main_thread = threading.get_ident()
    acc: dict[str, float] = {}
    lock = threading.Lock()

    def add(key: str, seconds: float) -> None:
        with lock:
            acc[key] = acc.get(key, 0.0) + seconds * 1e3

    sent: list[tuple[int, torch.dtype]] = []  # (elements, dtype) of each allreduce, the last step's

    def allreduce(state, bucket):
        launched = time.perf_counter()
        sent.append((bucket.buffer().numel(), bucket.buffer().dtype))

        def done(fut):
            add("allreduce", time.perf_counter() - launched)
            return fut.value()

        return default_hooks.allreduce_hook(state, bucket).then(done)

    def fp16(state, bucket):
        # torch's fp16_compress_hook (default_hooks._compress_hook), its parts timed.
        t0 = time.perf_counter()
        compressed = bucket.buffer().to(torch.float16).div_(world)
        t1 = time.perf_counter()
        sent.append((compressed.numel(), compressed.dtype))
        add("compress", t1 - t0)
        fut = dist.all_reduce(compressed, async_op=True).get_future()

        def decompress(fut):
            t2 = time.perf_counter()
            add("allreduce", t2 - t1)
            buffer = bucket.buffer()
            buffer.copy_(fut.value()[0])
            add("decompress on the autograd thread" if threading.get_ident() == main_thread else
                "decompress on another thread", time.perf_counter() - t2)
            return buffer

        return fut.then(decompress)

    model.register_comm_hook(None, allreduce if kind == "allreduce" else fp16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.MSELoss()
    x, y = torch.randn(batch, width), torch.randn(batch, width)
    faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt * 4096 / 2**20  # noqa: E731
    rows = []
    for _ in range(steps):
        dist.barrier()
        with lock:
            acc.clear()
        sent.clear()
        f0, t0 = faults(), time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        with lock:
            rows.append(dict(acc, step=(t3 - t0) * 1e3, forward=(t1 - t0) * 1e3, backward=(t2 - t1) * 1e3,
                             optimizer=(t3 - t2) * 1e3, faults=faults() - f0))
    # The same allreduces and compressions alone, in the same processes: each distinct size once (a barrier before
    # each allreduce, the slower rank's time), summed over the step's buckets.
    alone_ms: dict[tuple[int, torch.dtype], float] = {}
    compress_ms: dict[int, float] = {}
    for elements, dtype in sent:
        if (elements, dtype) not in alone_ms:
            buf, times = torch.zeros(elements, dtype=dtype), []
            for _ in range(5):
                dist.barrier()
                t0 = time.perf_counter()
                dist.all_reduce(buf)
                t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                times.append(t.item())
            alone_ms[elements, dtype] = statistics.median(times) * 1e3
        if kind == "fp16" and elements not in compress_ms:
            buf, times = torch.randn(elements), []
            for _ in range(5):
                t0 = time.perf_counter()
                buf.to(torch.float16).div_(world)
                times.append(time.perf_counter() - t0)
            compress_ms[elements] = statistics.median(times) * 1e3
    for row in rows:
        row["allreduces alone"] = sum(alone_ms[s] for s in sent)
        if kind == "fp16":
            row["compress alone"] = sum(compress_ms[n] for n, _ in sent)
    gathered = [None] * world
    dist.all_gather_object(gathered, rows)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(gathered, f)
    dist.destroy_process_group()


def dtsim_parts(dtsim: str, hardware: str, a, kind: str, workdir: str, extra: list[str]) -> dict[str, float]:
    """The same parts from dtsim's trace of rank 0, in ms; "alone" figures are the tasks' standalone prices.
    EXTRA: more of simulate's arguments (what the torch that ran does differently)."""
    cmd = [dtsim, "simulate", "--model", f"mlp-{a.layers}x{a.width}", "--hardware", hardware, "--nodes", "1",
           "--gpus-per-node", "2", "--micro-batch", str(a.batch), "--precision", "fp32", "--optimizer", "sgd",
           "--strategy", "ddp", "--set", f"bucket_cap_mb={a.cap}", "--set", HOOKS[kind]] + extra
    out, events, threads = simulated_step(cmd, os.path.join(workdir, f"{kind}.json"))
    for e in events:
        if e["name"].startswith("allreduce"):
            key = "allreduce"
        elif e["args"].get("phase") == "compression":  # the decompress passes run on the hook's callback stream
            key = "decompress" if threads.get(e["tid"]) == "comm_hook" else "compress"
        else:
            continue
        out[key] = out.get(key, 0.0) + e["dur"] / 1e3
        if key != "decompress":
            alone = f"{'allreduces' if key == 'allreduce' else key} alone"
            out[alone] = out.get(alone, 0.0) + e["args"].get("standalone_ns", 0) / 1e6
    return out


PARTS = [("forward", "forward"), ("backward", "backward (ends when the last callback has run)"),
         ("compress", "compression: cast and division, autograd thread"),
         ("compress alone", "the same compression alone (torch: after the steps; dtsim: its price alone)"),
         ("allreduce", "allreduces, launch to done (summed)"),
         ("allreduces alone", "the same allreduces alone (torch: timed after the steps; dtsim: its calibration)"),
         ("decompress on the autograd thread", "decompress callbacks, autograd thread"),
         ("decompress on another thread", "decompress callbacks, gloo's thread"),
         ("decompress", "decompress passes (dtsim)"), ("optimizer", "optimizer step"), ("step", "step")]


def main() -> int:
    a = breakdown_args("hook_breakdown.py", __doc__.split("\n\n")[0],
                       lambda ap: ap.add_argument("--cap", type=int, default=25, help="bucket_cap_mb (25)"))
    if a is None:
        return 2
    started, busy = time.time(), compilers_running()
    import torch

    extra = [arg for knob in ddp_knobs_for(torch) for arg in ("--set", knob)]

    lines = [f"### {datetime.date.today()}: where a DDP step under the fp16 hook goes, torch {torch.__version__} "
             f"against dtsim (mlp-{a.model}, bucket_cap_mb {a.cap}, batch {a.batch} per rank, 2 ranks, gloo)", "",
             "| part | torch allreduce hook (ms) | dtsim (ms) | torch fp16 hook (ms) | dtsim (ms) |",
             "|---|---:|---:|---:|---:|"]
    parts = {}
    with tempfile.TemporaryDirectory() as workdir:
        for kind in HOOKS:
            print(f"torch: {kind} hook", file=sys.stderr)
            rows = spawn_with_retry(worker, (a.layers, a.width, a.batch, a.cap, kind, a.steps), 2, "rows.json")
            parts[kind] = (rank_medians(rows, 4), dtsim_parts(a.dtsim, a.hardware, a, kind, workdir, extra))
    cell = lambda d, k: f"{d[k]:.1f}" if k in d else "-"  # noqa: E731
    for key, label in PARTS:
        (ta, da), (tf, df) = parts["allreduce"], parts["fp16"]
        if not any(key in d for d in (ta, da, tf, df)):
            continue
        lines.append(f"| {label} | {cell(ta, key)} | {cell(da, key)} | {cell(tf, key)} | {cell(df, key)} |")
    lines += ["", f"torch's page faults a step: {parts['allreduce'][0]['faults']:.0f} MiB under the allreduce hook, "
              f"{parts['fp16'][0]['faults']:.0f} MiB under fp16.",
              "", f"{machine_line(busy)} Calibration: {os.path.basename(a.hardware)}. "
              f"Run time {time.time() - started:.0f} s."]
    publish(lines, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
