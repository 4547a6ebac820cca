#!/usr/bin/env python3
"""Where torch's step gets fresh pages from the OS: glibc's heap, seen through its system calls.

    .venv/bin/python bench/torch_xcheck/heap_trace.py [--cases fsdp,ddp] [--steps 8] [--out FILE.md]

Each case trains mlp-8x2048 (batch 64 per rank, SGD, `zero_grad(set_to_none=True)`) on 2 ranks over gloo under
`strace -f`, and each rank marks its phases (forward, backward, optimizer, zero_grad) with a write to fd 2. The
script sums, per rank, phase and step, what glibc asked of the kernel:

- main arena: `brk` growth (pages the next writes fault in) and trims (pages handed back);
- chunks at or above the mmap threshold: `mmap` and `munmap` of anonymous memory;
- other threads' arenas (gloo's workers, autograd): heap growth (`mprotect` to read-write) and whole heaps
  released (`munmap`), the threads mapped to their rank through `clone`.

Fresh pages a step = brk growth + mmapped chunks + thread-heap growth. Beside them, each rank's minor page
faults a step (getrusage, every thread), the ground truth they should account for: a thread heap shrunk by
`madvise` regrows without a system call, and Python's own allocations fault too. dtsim prices the first touch of fresh
pages (`host.first_touch_gbps`); this shows which of a step's allocations are fresh, step by step, and so what a
model of glibc's heap must reproduce. It needs `strace` (Debian's package). Counts, not timings: the machine's
load does not matter.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtsim_run import machine_line, publish  # noqa: E402
from steptime import build_model  # noqa: E402

CASES = {
    "ddp": "DDP, bucket_cap_mb 25",
    "ddp_view": "DDP, gradient_as_bucket_view",
    "ddp_fp16": "DDP, fp16_compress_hook",
    "fsdp": "FSDP FULL_SHARD",
    "fsdp_sgo": "FSDP SHARD_GRAD_OP",
}
PHASES = ["fwd", "bwd", "opt", "zero"]
MiB = 1 << 20


def mark(text: str) -> None:
    """A phase mark for strace, with the process's minor page faults so far (every thread's)."""
    import resource
    os.write(2, f"@@MARK {text} {resource.getrusage(resource.RUSAGE_SELF).ru_minflt}\n".encode())


def worker(rank: int, world: int, port: int, case: str, steps: int) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = build_model(("mlp", 8, 2048))  # steptime.py's mlp-8x2048
    if case.startswith("fsdp"):
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        strategy = ShardingStrategy.FULL_SHARD if case == "fsdp" else ShardingStrategy.SHARD_GRAD_OP
        model = FSDP(model, sharding_strategy=strategy, auto_wrap_policy=ModuleWrapPolicy({torch.nn.Linear}),
                     device_id=torch.device("cpu"))
    else:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, bucket_cap_mb=25, gradient_as_bucket_view=case == "ddp_view")
        if case == "ddp_fp16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 2048), torch.randn(64, 2048)
    for s in range(steps):
        mark(f"r{rank} {s} fwd")
        loss = ((model(x) - y) ** 2).mean()
        mark(f"r{rank} {s} bwd")
        loss.backward()
        mark(f"r{rank} {s} opt")
        opt.step()
        mark(f"r{rank} {s} zero")
        opt.zero_grad(set_to_none=True)
    mark(f"r{rank} {steps} end")
    dist.destroy_process_group()


def run_case(case: str, steps: int, port: int) -> None:
    import torch.multiprocessing as mp
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=worker, args=(r, 2, port, case, steps)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode != 0 for p in procs):
        sys.exit(f"heap_trace: case {case}: a rank exited with {[p.exitcode for p in procs]}")


SYSCALL = re.compile(r"(\d+)\s+(.*)")
MARK = re.compile(r'write\(2, "@@MARK r(\d) (\d+) (\w+) (\d+)')
CLONE = re.compile(r"(?:clone3?\(|<\.\.\. clone3? resumed).*\)\s+= (\d+)$")
CLONE_START = re.compile(r"clone3?\(.*<unfinished \.\.\.>$")
BRK = re.compile(r"brk\((0x[0-9a-f]+|NULL)\)\s+= (0x[0-9a-f]+)")
MMAP = re.compile(r"mmap\(NULL, (\d+), PROT_READ\|PROT_WRITE, MAP_PRIVATE\|MAP_ANONYMOUS, -1, 0\)\s+= 0x")
MUNMAP = re.compile(r"munmap\(0x[0-9a-f]+, (\d+)\)\s+= 0")
GROW = re.compile(r"mprotect\(0x[0-9a-f]+, (\d+), PROT_READ\|PROT_WRITE\)\s+= 0")


def parse(path: str) -> dict:
    """{(rank, step, phase): Counter of bytes by kind}, from an `strace -f` log."""
    rank_of: dict[int, int] = {}
    parent: dict[int, int] = {}
    phase: dict[int, tuple[int, str]] = {}
    # The break is the process's, not the thread's: a gloo worker that frees a chunk into the main arena
    # may trim it. So it is followed per process (a thread's process is its creator's; CLONE_THREAD).
    process: dict[int, int] = {}
    pending_thread: dict[int, bool] = {}
    brk: dict[int, int] = {}
    out: dict = collections.defaultdict(collections.Counter)
    faults: dict[tuple[int, int, str], int] = {}

    def owner(pid: int) -> int | None:
        for _ in range(64):
            if pid in rank_of:
                return rank_of[pid]
            if pid not in parent:
                return None
            pid = parent[pid]
        return None

    with open(path) as f:
        for line in f:
            m = SYSCALL.match(line)
            if not m:
                continue
            pid, rest = int(m.group(1)), m.group(2).rstrip()
            if CLONE_START.match(rest):
                pending_thread[pid] = "CLONE_THREAD" in rest
                continue
            if c := CLONE.match(rest):
                child = int(c.group(1))
                parent[child] = pid
                thread = "CLONE_THREAD" in rest or pending_thread.pop(pid, False)
                process[child] = process.get(pid, pid) if thread else child
                continue
            if k := MARK.match(rest):
                rank_of[pid] = int(k.group(1))
                phase[int(k.group(1))] = (int(k.group(2)), k.group(3))
                faults[(int(k.group(1)), int(k.group(2)), k.group(3))] = int(k.group(4))
                continue
            r = owner(pid)
            key = (r, *phase[r]) if r is not None and r in phase else None
            if b := BRK.match(rest):
                new, proc = int(b.group(2), 16), process.get(pid, pid)
                if proc in brk and key:
                    d = new - brk[proc]
                    if d:
                        out[key]["brk_grow" if d > 0 else "brk_trim"] += abs(d)
                brk[proc] = new
            elif key and (mm := MMAP.match(rest)):
                out[key]["mmap"] += int(mm.group(1))
            elif key and (mu := MUNMAP.match(rest)):
                out[key]["munmap"] += int(mu.group(1))
            elif key and (g := GROW.match(rest)) and pid not in rank_of:
                out[key]["thread_grow"] += int(g.group(1))
    # Minor faults a step (4 KiB pages, every thread), from one step's first mark to the next's.
    page = os.sysconf("SC_PAGE_SIZE")
    for (r, step, ph), n in faults.items():
        after = faults.get((r, step + 1, "fwd"), faults.get((r, step + 1, "end")))
        if ph == "fwd" and after is not None:
            out[(r, step, "fwd")]["faulted"] = (after - n) * page
    return out


def fresh(c: collections.Counter) -> float:
    return (c["brk_grow"] + c["mmap"] + c["thread_grow"]) / MiB


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--steps", type=int, default=8, help="steps a case; the first 2 are warm-up")
    ap.add_argument("--out", help="append the markdown to this file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        run_case(a.worker, a.steps, 29000 + os.getpid() % 1000)
        return 0
    cases = [c for c in a.cases.split(",") if c]
    for c in cases:
        if c not in CASES:
            ap.error(f"--cases: unknown case '{c}'; expected some of {', '.join(CASES)}")
    if a.steps < 4:
        ap.error("--steps: expected at least 4 (2 warm-up, 2 counted)")
    if not shutil.which("strace"):
        sys.exit("heap_trace: needs strace (apt-get install strace)")
    import torch
    lines = [f"### {datetime.date.today()}: fresh pages a step in torch {torch.__version__}, from glibc's system calls "
             f"(`heap_trace.py`, mlp-8x2048, batch 64 per rank, 2 ranks, gloo)", "",
             "MiB a step, steps 2 on; per rank, the step's fresh pages (brk growth + mmapped chunks + other threads' "
             "heap growth) and where they came in; trims are what the main arena handed back.", "",
             "| case | rank | fresh a step, by step (MiB) | mean | in forward | in backward | in optimizer + zero_grad "
             "| main arena trims a step | chunks mmapped a step | page faults a step (MiB, getrusage) |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            log = os.path.join(tmp, f"{case}.strace")
            cmd = ["strace", "-f", "-o", log, "-e", "trace=brk,mmap,munmap,mprotect,write,clone,clone3",
                   sys.executable, os.path.abspath(__file__), "--worker", case, "--steps", str(a.steps)]
            print(f"heap_trace: {CASES[case]} under strace", file=sys.stderr)
            subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
            events = parse(log)
            for rank in (0, 1):
                counted = range(2, a.steps)
                per_step = [sum(fresh(events[(rank, s, p)]) for p in PHASES) for s in counted]
                by_phase = {p: statistics.mean(fresh(events[(rank, s, p)]) for s in counted) for p in PHASES}
                trims = statistics.mean(sum(events[(rank, s, p)]["brk_trim"] for p in PHASES) / MiB for s in counted)
                mapped = statistics.mean(sum(events[(rank, s, p)]["mmap"] for p in PHASES) / MiB for s in counted)
                faulted = statistics.mean(events[(rank, s, "fwd")]["faulted"] / MiB for s in counted)
                lines.append(f"| {CASES[case]} | {rank} | {', '.join(f'{v:.0f}' for v in per_step)} | "
                             f"{statistics.mean(per_step):.0f} | {by_phase['fwd']:.0f} | {by_phase['bwd']:.0f} | "
                             f"{by_phase['opt'] + by_phase['zero']:.0f} | {trims:.0f} | {mapped:.0f} | {faulted:.0f} |")
    lines += ["", machine_line("n/a (counts, not timings)")]
    publish(lines, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
