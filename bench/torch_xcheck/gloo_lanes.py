#!/usr/bin/env python3
"""How much ProcessGroupGloo gains from its two worker threads: allreduces issued one at a time against the same
allreduces issued back to back (async_op=True) and waited for together, 2 ranks, in one run.

    .venv/bin/python bench/torch_xcheck/gloo_lanes.py [--sizes-kib 4,1024,4096,16384] [--calls 16] [--out FILE.md]

torch's ProcessGroupGloo runs each collective on one of two worker threads (options->threads = 2 per device;
docs/notes/gloo-in-torch.md §2), so DDP's buckets, queued back to back as their gradients arrive, can be two at a
time on one context. dtsim's engine (CostModel::lanes) and its gloo communicator do the same. This prints,
per size, the time per call both ways (the fastest of --reps rounds, each round interleaving the two) and the
ratio: how much of a call two lanes hide.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtsim_run import compilers_running, publish  # noqa: E402


def worker(rank: int, world: int, init: str, sizes_kib: list[int], calls: int, reps: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    rows = []
    for kib in sizes_kib:
        bufs = [torch.zeros(kib * 1024 // 4) for _ in range(calls)]
        best = {"serial": float("inf"), "two lanes": float("inf")}
        for _ in range(reps):
            for mode in best:
                dist.barrier()
                t0 = time.perf_counter()
                if mode == "serial":
                    for b in bufs:
                        dist.all_reduce(b)
                else:
                    for w in [dist.all_reduce(b, async_op=True) for b in bufs]:
                        w.wait()
                t = torch.tensor([(time.perf_counter() - t0) / calls])
                dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slower rank
                best[mode] = min(best[mode], t.item())
        rows.append((kib, best["serial"], best["two lanes"]))
    if rank == 0:
        with open(out, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes-kib", default="4,1024,4096,16384", help="allreduce sizes in KiB, comma-separated")
    ap.add_argument("--calls", type=int, default=16, help="allreduces per round")
    ap.add_argument("--reps", type=int, default=3, help="rounds; the fastest is kept")
    ap.add_argument("--out", help="append the table to this markdown file")
    a = ap.parse_args()
    try:
        sizes = [int(v) for v in a.sizes_kib.split(",")]
        if not sizes or min(sizes) <= 0:
            raise ValueError
    except ValueError:
        print(f"gloo_lanes.py: --sizes-kib {a.sizes_kib!r}: expected positive integers, comma-separated",
              file=sys.stderr)
        return 2
    import torch
    import torch.multiprocessing as mp

    busy = compilers_running()
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "rows")
        try:
            mp.spawn(worker, args=(2, "file://" + os.path.join(d, "store"), sizes, a.calls, a.reps, out), nprocs=2)
        except mp.ProcessExitedException:
            if not os.path.exists(out):  # gloo's teardown aborts now and then after the work is done
                raise
        with open(out) as f:
            rows = json.load(f)
    lines = [f"## {datetime.date.today()}: ProcessGroupGloo's two worker threads (torch {torch.__version__}, "
             f"2 ranks, fp32 allreduce)", "",
             f"Machine: {platform.node()} ({os.cpu_count()} cores). Compilers running at the start: {busy}. "
             f"{a.calls} allreduces a round, the fastest of {a.reps} rounds, slower rank.", "",
             "| size | one at a time (ms a call) | back to back, async (ms a call) | async / one at a time |",
             "|---:|---:|---:|---:|"]
    for kib, serial, lanes in rows:
        lines.append(f"| {kib} KiB | {serial * 1e3:.2f} | {lanes * 1e3:.2f} | {lanes / serial:.2f} |")
    publish(lines, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
