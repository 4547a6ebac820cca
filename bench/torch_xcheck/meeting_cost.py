#!/usr/bin/env python3
"""What a meeting of two ranks costs in torch over gloo, beyond the collective itself.

    .venv/bin/python bench/torch_xcheck/meeting_cost.py [--mib 16] [--samples 30] [--out FILE.md]

Two processes, backend gloo, one intra-op thread each. Each collective runs `--samples` times in each of three
settings, and the first 5 samples are dropped:

- after a barrier, so that the ranks start it together;
- after 1 GEMM that each rank computes on its own (64x2048 by 2048x2048, about 8 ms here);
- after 4 such GEMMs.

The collectives are FSDP1's list-form `all_gather` of a `--mib` MiB output and an in-place `all_reduce` of `--mib`
MiB. The time is the call's time, perf_counter around it.

dtsim's straggler term charges the slower rank's lateness in proportion to the compute since the ranks last met
(calibrate's lockstep spread, a few per cent). A cost that does not grow from 1 GEMM to 4 is a fixed cost per
meeting: waking gloo's threads on a machine with fewer cores than threads. FSDP meets 24 times a step of
mlp-8x2048 and DDP a few times, so such a cost would weigh on FSDP.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtsim_run import compilers_running, machine_line, publish  # noqa: E402
from steptime import spawn_with_retry  # noqa: E402

SEGMENTS = [0, 1, 4]  # GEMMs before the collective; 0: a barrier instead
WARMUP = 5


def worker(rank: int, world: int, init: str, mib: int, samples: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    x = torch.randn(64, 2048)
    weights = [torch.randn(2048, 2048) for _ in range(4)]
    elements = (mib << 20) // 4
    shard, gathered, reduced = torch.randn(elements // world), torch.empty(elements), torch.randn(elements)
    calls = {
        "all_gather (list form, FSDP's)": lambda: dist.all_gather(list(torch.chunk(gathered, world)), shard),
        "all_reduce (in place)": lambda: dist.all_reduce(reduced),
    }
    result: dict[str, dict[str, list[float]]] = {}
    for name, call in calls.items():
        result[name] = {}
        for segment in SEGMENTS:
            times = []
            for _ in range(samples):
                dist.barrier()
                for j in range(segment):
                    torch.nn.functional.linear(x, weights[j % len(weights)])
                if segment == 0:
                    dist.barrier()
                t0 = time.perf_counter()
                call()
                times.append((time.perf_counter() - t0) * 1e3)
            result[name][str(segment)] = times[WARMUP:]
    gathered_results = [None] * world
    dist.all_gather_object(gathered_results, result)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(gathered_results, f)
    dist.destroy_process_group()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=16, help="the collective's size in MiB (16: one mlp-8x2048 unit)")
    ap.add_argument("--samples", type=int, default=30, help=f"calls per setting (30; the first {WARMUP} dropped)")
    ap.add_argument("--out", help="append the table to this markdown file")
    a = ap.parse_args()
    if a.mib < 1 or a.samples <= WARMUP + 2:
        print(f"meeting_cost.py: --mib must be at least 1 and --samples above {WARMUP + 2}", file=sys.stderr)
        return 2
    started, busy = time.time(), compilers_running()
    import torch

    ranks = spawn_with_retry(worker, (a.mib, a.samples), 2, "meeting.json")
    lines = [f"### {datetime.date.today()}: what a meeting of two ranks costs in torch {torch.__version__} over "
             f"gloo ({a.mib} MiB, {a.samples - WARMUP} samples a setting)", "",
             "Medians in ms: each rank's call, their mean sample by sample, and the slower of the two. "
             "`+` is the mean's excess over the same call after a barrier.", "",
             "| collective | before it | rank 0 | rank 1 | mean | slower | + |", "|---|---|---:|---:|---:|---:|---:|"]
    for name in ranks[0]:
        base = None
        for segment in SEGMENTS:
            r0, r1 = ranks[0][name][str(segment)], ranks[1][name][str(segment)]
            mean = statistics.median((u + v) / 2 for u, v in zip(r0, r1))
            slower = statistics.median(max(u, v) for u, v in zip(r0, r1))
            base = mean if base is None else base
            what = "a barrier" if segment == 0 else f"{segment} GEMM{'s' if segment > 1 else ''} on its own"
            lines.append(f"| {name} | {what} | {statistics.median(r0):.1f} | {statistics.median(r1):.1f} | "
                         f"{mean:.1f} | {slower:.1f} | {mean - base:+.1f} |")
    lines += ["", f"{machine_line(busy)} Run time {time.time() - started:.0f} s."]
    publish(lines, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
