#!/usr/bin/env python3
"""Real torch DDP step times on this machine against dtsim's predictions, in one run.

    .venv/bin/python bench/torch_xcheck/steptime.py --dtsim build/ci/cli/dtsim [--out FILE.md]
    /usr/bin/python3 bench/torch_xcheck/steptime.py --dtsim build/ci/cli/dtsim [--out FILE.md]

Needs a built dtsim (it never builds) and a torch: PyPI's torch 2.x from the venv of scripts/make-venv.sh, or
Debian's python3-torch (1.13, `apt-get install python3-torch`) under the system python, which does its GEMMs with
the system OpenBLAS that dtsim's calibration measures (point 2).

1. torch (PyPI 2.x, gloo, one intra-op thread per rank): dtsim's mlp-LxW as
   nn.Sequential of L x (Linear(W, W), ReLU), MSELoss, SGD, batch B per rank.
   Cases: DDP on 1 rank; on 2 ranks with bucket_cap_mb 1, 25 and 100, with
   gradient_as_bucket_view, and with the fp16 compression hook; FSDP1
   FULL_SHARD and SHARD_GRAD_OP, each Linear a unit, on 2 ranks. A step is
   zero_grad(set_to_none), forward, loss, backward, optimizer step, timed on
   each rank, the slower rank taken; a run's figure is the median over the
   steps after warm-up. Each case runs twice, interleaved with the others.
   This 2-core VM now and then slows one rank up to 3.5x for several steps
   (bench/results/torch_xcheck.md, stop 33), so a case whose runs differ by
   more than --settle (15 %) runs again, up to --max-runs (5) in all, until
   two of its runs agree within it; the case's figure is the median of its
   runs. A case that never settles is reported as disturbed, and the run is
   void: its errors are printed but judge nothing. The three bucket cases
   run --ranking-runs (4) times at least: their range is torch's noise in
   the bucket ranking, and two runs' range understates it. A pair counts
   for the ranking only where its runs fall wholly apart as well (four runs
   a case: 2 chances in 70 when they do not differ).
2. Compute priced as torch runs it. Under Debian's torch, whose BLAS is the
   system OpenBLAS (checked in the process's maps), dtsim prices every GEMM from its own
   calibration, and the ranks' spread too: the same library, measured by dtsim
   alone, so those rows test the calibration end to end. Debian's torch is
   1.13: DDP's first bucket stays 1 MiB whatever bucket_cap_mb says, so dtsim
   is told `first_bucket_mb=1`; its FSDP runs on CUDA only (and does not
   import under Python 3.11), so the FSDP cases are left out. The output says
   both. Whatever the torch, `calibrate` and `execute` are given its version
   (`--torch-version X.Y`): before 2.8 torch's gloo sums fp16 (the fp16
   hook's allreduce) in gloo::float16, about 2.3x slower than c10::Half. Otherwise: PyPI torch does its CPU GEMMs with MKL
   (`torch.__config__.show()`), not the OpenBLAS that dtsim's calibration
   measures, so this times torch's own GEMMs at the model's shapes and layouts
   (forward x.W^T, input gradient dY.W, weight gradient dY^T.X) and hands them
   to dtsim as the calibration's GEMM points: the median of the timing windows
   that precede every torch run, since this machine's speed drifts 10-50 %
   within minutes (each case's own windows are printed; pricing each case at
   its own two or three windows was tried and lets one slow window move a case
   by 25 %). Elementwise work, copies and the optimizer stay on the
   calibration's measured memory rates.
3. dtsim: `calibrate --backend gloo` (the transport torch uses), the GEMM points
   merged in, and the ranks' spread (how much later the slower of two ranks
   finishes the same GEMMs in lockstep, `overlap.straggler`) measured with
   torch's GEMMs too; then `simulate` for every case.
4. It prints each prediction's error, the median and p90 of |error|, and
   whether dtsim ranks the bucket sizes as torch does where torch's own
   difference exceeds its run-to-run noise. Separate runs minutes apart
   carry this machine's drift (their range was 5-42 % a case), more than
   the sizes differ, so the ranking is also judged where drift cancels:
   the three sizes as three DDP models in one pair of processes,
   --interleave-rounds (10) rounds, each giving every size
   --interleave-steps (3) steps in turn. A pair counts when one size is the
   faster in enough rounds for a two-sided sign test's p <= 0.05 (9 of 10).
5. A second, communication-heavy MLP (--ranking-model, 32 x 512 by default:
   1 MiB a layer, so bucket_cap_mb=1 makes 32 latency-bound allreduces and
   100 one exposed 32 MiB allreduce) for the bucket ranking: on the main
   model torch's bucket differences rarely exceed its own run-to-run noise
   on this 2-core machine, so that check had no pair to count. Its three
   bucket sizes run --ranking-runs times each (4), torch's GEMMs at its
   shapes join the calibration's GEMM points, and its table gives torch's
   runs, dtsim's prediction and the ranking over the pairs torch separates.
6. dtsim's executor as a stand-in for torch: `execute --backend gloo
   --allocator torch --mode train` runs every case for real (gloo collectives
   called as ProcessGroupGloo calls them, gradients freed and reallocated each
   step under glibc's default malloc); its step time is printed beside
   torch's. Its GEMMs are OpenBLAS's, not MKL's.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from dtsim_run import bucket_ranking, calibrate, compilers_running, interleaved_ranking, p90, publish, spread

# One BLAS thread a rank, as dtsim's calibration and executor run: Debian's torch calls the system OpenBLAS, whose
# pthread build otherwise starts a thread per core in each rank, ignores torch.set_num_threads and, two ranks on two
# cores, spins them against each other. Set before any torch is imported here or in the spawned ranks.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# name -> (ranks, DDP keyword arguments / hook / FSDP sharding, dtsim's strategy and --set knobs).
# FSDP1 wraps each Linear (ModuleWrapPolicy); dtsim's size policy closing a
# unit at width^2 parameters gives the same units ("{unit}" is filled in).
CASES = {
    "1 rank": (1, {}, ["ddp"]),
    "bucket 1 MiB": (2, {"bucket_cap_mb": 1}, ["ddp", "bucket_cap_mb=1"]),
    "bucket 25 MiB": (2, {"bucket_cap_mb": 25}, ["ddp", "bucket_cap_mb=25"]),
    "bucket 100 MiB": (2, {"bucket_cap_mb": 100}, ["ddp", "bucket_cap_mb=100"]),
    "as bucket view": (2, {"gradient_as_bucket_view": True}, ["ddp", "gradient_as_bucket_view=true"]),
    "fp16 hook": (2, {"hook": "fp16"}, ["ddp", "comm_hook=fp16_compress"]),
    "FSDP FULL_SHARD": (2, {"fsdp": "FULL_SHARD"},
                        ["fsdp", "sharding_strategy=FULL_SHARD", "auto_wrap_policy=size", "min_num_params={unit}"]),
    "FSDP SHARD_GRAD_OP": (2, {"fsdp": "SHARD_GRAD_OP"},
                           ["fsdp", "sharding_strategy=SHARD_GRAD_OP", "auto_wrap_policy=size",
                            "min_num_params={unit}"]),
    # FSDP2: fully_shard on each Linear, then on the model.
    "FSDP2": (2, {"fsdp2": True}, ["fsdp2", "units=size", "min_num_params={unit}"]),
}
BUCKET_CASES = ["bucket 1 MiB", "bucket 25 MiB", "bucket 100 MiB"]


def torch_version(torch) -> tuple[int, int]:
    """(major, minor) of the torch that runs: "1.13.1+dfsg" -> (1, 13)."""
    return tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])


def torch_blas(torch) -> str:
    """The BLAS torch does its CPU GEMMs with: "mkl" where `torch.__config__.show()` says BLAS_INFO=mkl (PyPI's
    wheels link it statically), "openblas" where the process has OpenBLAS mapped after a GEMM (Debian's
    python3-torch says BLAS_INFO=generic: it calls the system libblas.so.3, which Debian's alternatives point at
    OpenBLAS, the library dtsim links), else what BLAS_INFO says ("unknown" without it)."""
    info = "unknown"
    for line in torch.__config__.show().splitlines():
        for word in line.replace(",", " ").split():
            if word.startswith("BLAS_INFO="):
                info = word.split("=", 1)[1]
    if info == "mkl":
        return info
    torch.mm(torch.randn(8, 8), torch.randn(8, 8))
    with open("/proc/self/maps") as f:
        return "openblas" if "libopenblas" in f.read() else info


def ddp_knobs_for(torch) -> list[str]:
    """dtsim's knobs for what the torch that runs does differently in DDP: before 2.4 the first bucket is 1 MiB
    whatever bucket_cap_mb says (`dist._DEFAULT_FIRST_BUCKET_BYTES`); from 2.4 an explicit bucket_cap_mb is the
    first bucket's cap too, which is dtsim's default."""
    return ["first_bucket_mb=1"] if torch_version(torch) < (2, 4) else []


def cases_for(torch) -> tuple[dict, list[str]]:
    """CASES as the torch that runs them behaves, and a line for each change:
    - before 2.4, DDP's first bucket is 1 MiB whatever bucket_cap_mb says (`dist._DEFAULT_FIRST_BUCKET_BYTES`);
      from 2.4 an explicit bucket_cap_mb is the first bucket's cap too, which is dtsim's default. So older torch
      gets `first_bucket_mb=1` on every DDP case.
    - FSDP runs on CPU (`device_id=torch.device("cpu")`, gloo's all-gather into chunks) from torch 2.1; the FSDP
      cases are left out on older torch, and wherever torch.distributed.fsdp does not import. FSDP2 (fully_shard)
      is public from 2.6."""
    cases, notes = dict(CASES), []
    version = torch_version(torch)
    if knobs := ddp_knobs_for(torch):
        cases = {n: (r, kw, spec + knobs if spec[0] == "ddp" and r > 1 else spec) for n, (r, kw, spec) in cases.items()}
        notes.append(f"torch {torch.__version__} keeps DDP's first bucket at 1 MiB whatever bucket_cap_mb is "
                     "(before 2.4): dtsim is given `--set first_bucket_mb=1` for the 2-rank DDP cases")
    why = "FSDP runs on CPU from torch 2.1" if version < (2, 1) else None
    try:
        import torch.distributed.fsdp  # noqa: F401
    except Exception as e:  # Debian's 1.13 under Python 3.11: a dataclass default that 3.11 refuses
        why = f"torch.distributed.fsdp does not import here: {type(e).__name__}: {e}"
    def leave_out(keys: tuple[str, ...], reason: str) -> None:
        nonlocal cases
        dropped = [n for n, (_, kw, _) in cases.items() if any(k in kw for k in keys)]
        cases = {n: c for n, c in cases.items() if n not in dropped}
        notes.append(f"left out: {', '.join(dropped)} on torch {torch.__version__} ({reason})")

    if why:
        leave_out(("fsdp", "fsdp2"), why)
        return cases, notes
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError as e:  # public from torch 2.6
        leave_out(("fsdp2",), f"no fully_shard: {e}")
    return cases, notes


def build_model(spec: tuple):
    """("mlp", layers, width): nn.Sequential of layers x (Linear, ReLU). ("transformer", layers, d_model, heads,
    seq): nn.TransformerEncoder (batch_first, no dropout, dim_feedforward 4 x d_model)."""
    import torch.nn as nn

    if spec[0] == "transformer":
        _, layers, d, heads, _ = spec
        layer = nn.TransformerEncoderLayer(d_model=d, nhead=heads, dim_feedforward=4 * d, dropout=0.0,
                                           batch_first=True)
        return nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
    _, layers, width = spec
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*mods)


def model_input_shape(spec: tuple, batch: int) -> tuple:
    return (batch, spec[4], spec[2]) if spec[0] == "transformer" else (batch, spec[2])


def train_step(model, opt, loss_fn, x, y, after_zero_grad=None) -> None:
    opt.zero_grad(set_to_none=True)
    if after_zero_grad:
        after_zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()


def timed_step(model, opt, loss_fn, x, y, after_zero_grad=None) -> tuple[float, float]:
    """One train_step between a barrier and an allreduce of its time and its minor page faults (getrusage), each
    the larger of the ranks': (seconds, faults)."""
    import torch
    import torch.distributed as dist

    dist.barrier()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    train_step(model, opt, loss_fn, x, y, after_zero_grad)
    local = torch.tensor([time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0],
                         dtype=torch.float64)
    dist.all_reduce(local, op=dist.ReduceOp.MAX)
    return local[0].item(), local[1].item()


def leave(dist) -> None:
    """A rank's end once its figures are written: a barrier, then the process exits at once. Debian's torch 1.13
    now and then deadlocks destroying a DDP model with gradient_as_bucket_view at the end of the worker (a thread
    join that never returns), and torch 2.x's gloo teardown aborts now and then; neither has anything left to do."""
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def spawn_with_retry(worker, args: tuple, nprocs: int, out_name: str):
    """mp.spawn(worker, args + (OUT,)) on a file:// store in a fresh directory; returns the JSON the workers wrote to
    OUT. gloo's teardown aborts now and then ("terminate called without an active exception") after every step was
    timed and OUT written; such a run is repeated, up to twice, and said so."""
    import torch.multiprocessing as mp

    for attempt in (1, 2, 3):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, out_name)
            try:
                mp.spawn(worker, args=(nprocs, "file://" + os.path.join(d, "store")) + args + (out,), nprocs=nprocs)
            except mp.ProcessExitedException as e:
                if attempt == 3 or not os.path.exists(out):
                    raise
                print(f"torch run ended abnormally after its steps ({e}); running it again", file=sys.stderr)
                continue
            with open(out) as f:
                return json.load(f)
    raise RuntimeError("unreachable")


def ddp_worker(rank: int, world: int, init: str, spec: tuple, batch: int, steps: int, kwargs: dict,
               out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(1)
    kwargs = dict(kwargs)
    hook = kwargs.pop("hook", None)
    sharding = kwargs.pop("fsdp", None)
    wrap = kwargs.pop("fsdp_wrap", "linear")  # "linear": one unit per nn.Linear; "none": the root only
    if kwargs.pop("fsdp2", False):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        model = build_model(spec)
        mesh = init_device_mesh("cpu", (world,))
        for m in [m for m in model.modules() if isinstance(m, torch.nn.Linear)]:
            fully_shard(m, mesh=mesh)
        fully_shard(model, mesh=mesh)
    elif sharding:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy

        model = FSDP(build_model(spec), sharding_strategy=getattr(ShardingStrategy, sharding),
                     auto_wrap_policy=None if wrap == "none" else ModuleWrapPolicy({torch.nn.Linear}),
                     device_id=torch.device("cpu"))
    else:
        model = DDP(build_model(spec), **kwargs)
    if hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.MSELoss()
    x = torch.randn(*model_input_shape(spec, batch))
    y = torch.randn(*model_input_shape(spec, batch))
    times, faults = [], []
    for _ in range(steps):
        t, f = timed_step(model, opt, loss_fn, x, y)
        times.append(t)
        faults.append(f)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"times": times, "faults": faults}, f)
    leave(dist)


def run_torch_case(ranks: int, kwargs: dict, a, spec: tuple | None = None, faults: list | None = None) -> float:
    """The median step (slower rank) after a.warmup steps of a.steps, on `ranks` ranks. With `faults`, appends
    to it the median of the page faults a step took (minor faults, getrusage; the rank with more): what glibc's
    allocator made torch touch afresh, which dtsim's first-touch charge models."""
    spec = spec or ("mlp", a.layers, a.width)
    run = spawn_with_retry(ddp_worker, (spec, a.batch, a.steps, kwargs), ranks, "times.json")
    if faults is not None:
        faults.append(statistics.median(run["faults"][a.warmup:]))
    return statistics.median(run["times"][a.warmup:])


def interleaved_worker(rank: int, world: int, init: str, spec: tuple, batch: int, caps: list[int], rounds: int,
                       steps: int, out: str) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    loss_fn = torch.nn.MSELoss()
    x = torch.randn(*model_input_shape(spec, batch))
    y = torch.randn(*model_input_shape(spec, batch))
    models = []
    for cap in caps:
        torch.manual_seed(1)
        model = DDP(build_model(spec), bucket_cap_mb=cap)
        models.append((model, torch.optim.SGD(model.parameters(), lr=1e-3)))

    # Alone, each model's freed gradients lie at the top of glibc's heap and go back to the OS (its trim threshold),
    # so every step faults them in afresh (about 128 MiB a step on mlp-8x2048, the separate runs' column). Three
    # models in one process keep one another's memory above them, so nothing is trimmed and no step faults. The
    # heap is trimmed where the freeing happens, as it is alone: right after zero_grad(set_to_none=True).
    trim = ctypes.CDLL("libc.so.6").malloc_trim
    faults: list[list[float]] = [[] for _ in caps]

    def step(i: int) -> float:
        t, f = timed_step(*models[i], loss_fn, x, y, after_zero_grad=lambda: trim(0))
        faults[i].append(f)
        return t

    for i in range(len(caps)):  # warm-up: the reducer rebuilds its buckets after the first step
        for _ in range(3):
            step(i)
    for f in faults:
        f.clear()
    table = [[0.0] * len(caps) for _ in range(rounds)]
    for r in range(rounds):
        for j in range(len(caps)):
            i = (r + j) % len(caps)  # each round starts at another size
            table[r][i] = statistics.median(step(i) for _ in range(steps))
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"rounds": table, "faults": [statistics.median(f) for f in faults]}, f)
    leave(dist)


def run_interleaved(a, spec: tuple, caps: list[int]) -> dict:
    """torch's bucket sizes in one pair of processes, step by step: one DDP model per bucket cap (same weights, same
    batch), a.interleave_rounds rounds, each giving every model a.interleave_steps steps in turn (the round's
    figure is their median, slower rank). The sizes meet the machine in the same state, so a difference between
    them stands out of drift that separate runs minutes apart cannot tell from it. The three models share one
    allocator, whose heap is trimmed after each zero_grad so that the gradients fault in afresh as they do alone;
    their page faults (the median per step, the rank with more) are returned to compare with the separate runs'. Returns {"rounds": [round][cap] seconds, "faults": [cap] pages}."""
    return spawn_with_retry(interleaved_worker, (spec, a.batch, caps, a.interleave_rounds, a.interleave_steps), 2,
                            "rounds.json")


def interleaved_intro(result: dict, a) -> str:
    """The line above an interleaved ranking's table: what ran, and each size's median over the rounds and its
    page faults a step."""
    table = result["rounds"]
    medians = [statistics.median(row[i] for row in table) * 1e3 for i in range(len(BUCKET_CASES))]
    return (f"Interleaved in one pair of processes ({len(table)} rounds of {a.interleave_steps} steps per size in turn, "
            "each round starting at another size, the heap trimmed after zero_grad as it is alone; medians over the "
            "rounds, and torch's faults a step): " +
            ", ".join(f"{n} {m:.1f} ms ({f * 4096 / 2**20:.0f} MiB)"
                      for n, m, f in zip(BUCKET_CASES, medians, result["faults"])) + ".")


def settled(runs: list[float], limit: float) -> bool:
    """Whether two of the runs agree within `limit` (of the faster of the two)."""
    r = sorted(runs)
    return any(b / a - 1 <= limit for a, b in zip(r, r[1:]))


def time_gemm_window(a, width: int | None = None) -> list[float]:
    """One timing window of torch's own GEMMs (one thread) at the model's shapes: [forward, input gradient, weight
    gradient] in microseconds, each the mean over 0.3 s. `width`: the model's width (a.width by default)."""
    import torch

    torch.set_num_threads(1)
    B, W = a.batch, width or a.width
    x, w, bias, dy = torch.randn(B, W), torch.randn(W, W), torch.randn(W), torch.randn(B, W)

    def mean_us(fn) -> float:
        for _ in range(3):
            fn()
        samples = []
        start = time.perf_counter()
        while len(samples) < 10 or (time.perf_counter() - start < 0.3 and len(samples) < 200):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e6)
        return statistics.fmean(samples)

    return [mean_us(lambda: torch.nn.functional.linear(x, w, bias)),  # x.W^T + b: m=B, n=W, k=W
            mean_us(lambda: torch.mm(dy, w)),                         # dY.W:  m=B, n=W, k=W (same shape as forward)
            mean_us(lambda: torch.mm(dy.t(), x))]                     # dY^T.X: m=W, n=W, k=B


def lockstep_worker(rank: int, world: int, init: str, batch: int, layers: int, width: int, rounds: int,
                    out: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    x, w, dy = torch.randn(batch, width), torch.randn(width, width), torch.randn(batch, width)

    def window() -> float:
        t0 = time.perf_counter()
        for _ in range(layers):
            torch.nn.functional.linear(x, w)
            torch.mm(dy, w)
            torch.mm(dy.t(), x)
        return time.perf_counter() - t0

    window()
    slowest = mean = 0.0
    for _ in range(rounds):
        dist.barrier()
        times = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
        dist.all_gather(times, torch.tensor([window()], dtype=torch.float64))
        slowest += max(t.item() for t in times)
        mean += sum(t.item() for t in times) / world
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"straggler": slowest / mean}, f)
    leave(dist)


def lockstep_spread(a, rounds: int = 32) -> float:
    """How far apart 2 torch ranks finish the same compute (dtsim's overlap.straggler, measured as dtsim's calibrate
    measures it with OpenBLAS, here with torch's own GEMMs): each round both ranks meet at a barrier, then time the
    model's GEMMs of one step (forward, input and weight gradient of every layer); the mean over rounds of the slower
    rank's window over the ranks' mean."""
    return spawn_with_retry(lockstep_worker, (a.batch, a.layers, a.width, rounds), 2, "spread.json")["straggler"]


def gemm_points(a, windows: list[list[float]], width: int | None = None) -> list[dict]:
    """dtsim's GEMM points (m, n, k, layout, time_us) at the median of `windows` (time_gemm_window's), each at its
    own layout, as dtsim prices nn.Linear's three GEMMs."""
    B, W = a.batch, width or a.width
    forward, dgrad, wgrad = (statistics.median(w[i] for w in windows) for i in range(3))
    return [
        {"dtype": "fp32", "m": B, "n": W, "k": W, "batch": 1, "time_us": forward, "layout": "nt",
         "layouts": {"NT forward": forward}},
        {"dtype": "fp32", "m": B, "n": W, "k": W, "batch": 1, "time_us": dgrad, "layout": "nn",
         "layouts": {"NN input gradient": dgrad}},
        {"dtype": "fp32", "m": W, "n": W, "k": B, "batch": 1, "time_us": wgrad, "layout": "tn",
         "layouts": {"TN weight gradient": wgrad}},
    ]


def with_gemm_points(cal: dict, points: list[dict], path: str) -> str:
    """Writes `cal` with `points` as its GEMM points to `path`; returns `path`."""
    out = dict(cal, gemm_points=[{k: v for k, v in g.items() if k != "layouts"} for g in points])
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    return path


def dtsim_args(spec: list[str], a) -> list[str]:
    """A case's dtsim spec (strategy, then knobs) as command-line arguments."""
    args = ["--strategy", spec[0]]
    for k in spec[1:]:
        args += ["--set", k.format(unit=a.width * a.width)]
    return args


def dtsim_predict(dtsim: str, hardware: str, ranks: int, spec: list[str], a, model: str | None = None) -> float:
    cmd = [dtsim, "simulate", "--model", model or f"mlp-{a.layers}x{a.width}", "--hardware", hardware, "--nodes", "1",
           "--gpus-per-node", str(ranks), "--micro-batch", str(a.batch), "--precision", "fp32", "--optimizer", "sgd",
           "--format", "json"] + dtsim_args(spec, a)
    r = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return float(json.loads(r.stdout)["step_time_s"])


def torch_flag(torch) -> tuple[str, ...]:
    """dtsim's `--torch-version X.Y` for the torch that runs: its gloo sums fp16 as that torch's does."""
    return ("--torch-version", "{}.{}".format(*torch_version(torch)))


def dtsim_execute(dtsim: str, ranks: int, spec: list[str], a, torch_args: tuple[str, ...] = ()) -> float | None:
    """The executor's median step time for one case (None where it cannot train it)."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1")
    cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", dtsim, "execute", "--backend", "gloo", "--allocator",
           "torch", "--mode", "train", "--model", f"mlp-{a.layers}x{a.width}", "--micro-batch", str(a.batch),
           "--precision", "fp32", "--optimizer", "sgd", "--steps", str(a.steps), "--format", "json"]
    cmd += dtsim_args(spec, a) + list(torch_args)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(f"dtsim execute failed for {spec}: {r.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return float(json.loads(r.stdout)["median_step_time_s"])


def calibration_figures(cal: dict, layer_bytes: int) -> list[str]:
    """The calibration's figures that move the 2-rank rows most between runs: the contention factors and the
    allreduce of one layer's gradient (the nearest measured size), so that two runs' predictions can be told apart."""
    ov = cal.get("overlap", {})

    def factor(key: str) -> str:
        return f"x{ov[key]:.2f}" if key in ov else "n/a"

    out = [f"- calibration: compute under a collective {factor('compute_slowdown_under_comm')}, "
           f"a collective under compute {factor('comm_slowdown_under_compute')}"]
    for curve in cal.get("collectives", []):
        points = curve.get("points_size_bytes_time_us", [])
        if (curve.get("kind") != "allreduce" or curve.get("dtype", "fp32") != "fp32" or not points
                or curve.get("group_size") != 2 or curve.get("scope", "intra_node") != "intra_node"):
            continue
        size, us = min(points, key=lambda p: abs(p[0] - layer_bytes))
        out[0] += f", allreduce of {size / 2**20:.0f} MiB {us / 1e3:.1f} ms"
        break
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtsim", default=os.path.join(ROOT, "build", "ci", "cli", "dtsim"))
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=64, help="samples per rank")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--quick-calibration", action="store_true", help="calibrate --quick (collectives to 1 MiB only)")
    ap.add_argument("--ranking-model", default="32x512",
                    help="LxW of the communication-heavy MLP whose bucket sizes are ranked (none: skip it)")
    ap.add_argument("--ranking-runs", type=int, default=4,
                    help="torch runs of each bucket size, on both models (4): their range is the ranking's noise")
    ap.add_argument("--interleave-rounds", type=int, default=10,
                    help="rounds of the interleaved bucket ranking, on both models (10; 0: none)")
    ap.add_argument("--interleave-steps", type=int, default=3,
                    help="steps each bucket size takes in turn in a round of it (3; the round's figure: their median)")
    ap.add_argument("--settle", type=float, default=0.15,
                    help="a case is settled once two of its torch runs agree within this fraction (0.15)")
    ap.add_argument("--max-runs", type=int, default=5, help="torch runs of a case at most, settling it (5)")
    ap.add_argument("--keep-calibration", metavar="FILE",
                    help="also write the calibration dtsim simulated with (gloo, torch's GEMM points) to FILE")
    ap.add_argument("--out", help="append the table to this markdown file")
    a = ap.parse_args()
    if a.max_runs < 2 or not 0 < a.settle < 1:
        print("steptime.py: --max-runs must be at least 2 and --settle a fraction between 0 and 1", file=sys.stderr)
        return 2
    if not os.access(a.dtsim, os.X_OK):
        print(f"steptime.py: {a.dtsim} is not an executable dtsim; build it first", file=sys.stderr)
        return 2
    ranking = None
    if a.ranking_model != "none":
        try:
            ranking = tuple(int(v) for v in a.ranking_model.split("x"))
            if len(ranking) != 2 or min(ranking) <= 0:
                raise ValueError
        except ValueError:
            print(f"steptime.py: --ranking-model {a.ranking_model!r}: expected LxW (for example 32x512) or none",
                  file=sys.stderr)
            return 2
        if a.ranking_runs < 2:
            print("steptime.py: --ranking-runs must be at least 2 (the noise needs two runs)", file=sys.stderr)
            return 2
    try:
        import torch
    except ImportError:
        print(f"steptime.py: {sys.executable} has no torch: run it with the venv of scripts/make-venv.sh "
              "(.venv/bin/python, PyPI's torch 2.x) or, for Debian's torch 1.13 on the OpenBLAS path, "
              "apt-get install python3-torch and /usr/bin/python3", file=sys.stderr)
        return 2

    cases, case_notes = cases_for(torch)
    blas = torch_blas(torch)
    # Debian's python3-torch does its GEMMs with the system OpenBLAS, the library dtsim's calibration measures:
    # dtsim then prices compute from its own calibration, GEMMs and the ranks' spread alike, and torch's GEMM
    # windows are only printed beside each run. Any other BLAS (PyPI's MKL) lends dtsim torch's own GEMM times.
    own_gemms = blas == "openblas"
    busy = compilers_running()
    started = time.time()
    measured: dict[str, list[float]] = {}
    faults: dict[str, list[float]] = {}
    windows: list[list[float]] = []
    case_windows: dict[str, list[list[float]]] = {}  # the windows beside each case's own runs

    def torch_run(name: str) -> None:
        ranks, kwargs, _ = cases[name]
        print(f"torch: {name} (run {len(measured.get(name, [])) + 1})", file=sys.stderr)
        windows.append(time_gemm_window(a))  # a GEMM timing window beside each run
        case_windows.setdefault(name, []).append(windows[-1])
        measured.setdefault(name, []).append(run_torch_case(ranks, kwargs, a, faults=faults.setdefault(name, [])))

    time_gemm_window(a)  # unrecorded: a process's first window also pays MKL's set-up
    for _ in range(2):
        for name in cases:
            torch_run(name)
    # Cases whose runs disagree run again, one round over all of them at a time, so that a disturbance lasting a
    # minute does not hit one case's extra runs back to back.
    while unsettled := [n for n in cases if not settled(measured[n], a.settle) and len(measured[n]) < a.max_runs]:
        for name in unsettled:
            torch_run(name)
    disturbed = [n for n in cases if not settled(measured[n], a.settle)]
    # The bucket cases' runs also give torch's noise for the ranking, as their range: two runs' range is 1.13
    # standard deviations in expectation, three runs' 1.69, so two understate the noise a ranking is judged
    # against by a third (run G, stop 34, separated a pair on 4 % and 12 % that three runs would not have).
    # They run --ranking-runs times at least, as the ranking model's cases do.
    while short := [n for n in BUCKET_CASES if len(measured[n]) < a.ranking_runs]:
        for name in short:
            torch_run(name)
    ranked: dict[str, list[float]] = {}
    ranked_faults: dict[str, list[float]] = {}
    ranking_windows: list[list[float]] = []
    if ranking:
        for rep in range(a.ranking_runs):
            for name in BUCKET_CASES:
                print(f"torch: mlp-{ranking[0]}x{ranking[1]} {name} (run {rep + 1})", file=sys.stderr)
                ranking_windows.append(time_gemm_window(a, ranking[1]))
                ranked.setdefault(name, []).append(
                    run_torch_case(2, cases[name][1], a, spec=("mlp", ranking[0], ranking[1]),
                                   faults=ranked_faults.setdefault(name, [])))
    caps = [cases[n][1]["bucket_cap_mb"] for n in BUCKET_CASES]
    interleaved, ranked_interleaved = None, None
    if a.interleave_rounds > 0:
        print(f"torch: bucket sizes {caps} interleaved, {a.interleave_rounds} rounds", file=sys.stderr)
        interleaved = run_interleaved(a, ("mlp", a.layers, a.width), caps)
        if ranking:
            print(f"torch: mlp-{ranking[0]}x{ranking[1]} bucket sizes interleaved", file=sys.stderr)
            ranked_interleaved = run_interleaved(a, ("mlp", ranking[0], ranking[1]), caps)
    gemms = gemm_points(a, windows)
    print("torch: two ranks' lockstep spread", file=sys.stderr)
    straggler = lockstep_spread(a)
    ranking_gemms = gemm_points(a, ranking_windows, ranking[1]) if ranking else []
    with tempfile.TemporaryDirectory() as d:
        cal = calibrate(a.dtsim, "gloo", d, a.quick_calibration, torch_flag(torch))
        openblas_straggler = cal.get("overlap", {}).get("straggler", 1.0)
        if own_gemms:
            merged = os.path.join(d, "gloo.json")
        else:
            cal["name"] = cal["name"] + "+torch-gemms"
            cal["provenance"]["notes"] += (f"; GEMM points and the ranks' spread timed with torch {torch.__version__} "
                                           f"({blas}) by steptime.py")
            cal.setdefault("overlap", {}).update(straggler=straggler, straggler_ranks=2)
            merged = with_gemm_points(cal, gemms + ranking_gemms, os.path.join(d, "torch.json"))
        if a.keep_calibration:
            shutil.copyfile(merged, a.keep_calibration)
        predicted = {name: dtsim_predict(a.dtsim, merged, ranks, knobs, a) for name, (ranks, _, knobs) in cases.items()}
        ranked_predicted = {name: dtsim_predict(a.dtsim, merged, 2, cases[name][2], a,
                                                f"mlp-{ranking[0]}x{ranking[1]}") for name in ranked}
    executed = {}
    for name, (ranks, _, knobs) in cases.items():
        print(f"dtsim execute: {name}", file=sys.stderr)
        executed[name] = dtsim_execute(a.dtsim, ranks, knobs, a, torch_flag(torch))

    compute = ("its own OpenBLAS GEMMs (torch's BLAS is OpenBLAS too; torch's GEMMs timed beside each run are only "
               "printed)" if own_gemms else f"torch's GEMM times ({blas}) as its GEMM points")
    lines = [f"## {datetime.date.today()}: torch {torch.__version__} ({blas} BLAS) "
             f"{'DDP and FSDP' if any('fsdp' in kw or 'fsdp2' in kw for _, kw, _ in cases.values()) else 'DDP'} step times against "
             f"dtsim (mlp-{a.layers}x{a.width}, batch {a.batch} per rank, SGD, fp32, gloo)", "",
             f"Machine: {platform.node()} ({os.cpu_count()} cores). Compilers running at the start: {busy}. "
             f"Run time {time.time() - started:.0f} s. torch: median step of steps {a.warmup + 1}-{a.steps}, "
             f"slower rank; a case's figure is the median of its runs (two, or up to {a.max_runs} until two agree "
             f"within {a.settle * 100:.0f} %; the bucket cases at least {a.ranking_runs}). dtsim: `calibrate --backend gloo`"
             f"{' --quick' if a.quick_calibration else ''} with {compute}. A timing "
             f"window of torch's GEMMs precedes each torch run ({len(windows)} in all)"
             + ("; their median and range:" if own_gemms else
                "; dtsim takes their median (range below; each case's own windows are in the table):"),
             ""]
    for i, g in enumerate(gemms):
        lo, hi = min(w[i] for w in windows), max(w[i] for w in windows)
        lines.append(f"- GEMM m={g['m']} n={g['n']} k={g['k']}: " +
                     ", ".join(f"{k} {v:.0f} us" for k, v in g["layouts"].items()) + f" (windows {lo:.0f}-{hi:.0f} us)")
    lines += calibration_figures(cal, a.width * a.width * 4)
    spread_used = "which it uses" if own_gemms else "torch's is used"
    lines.append(f"- ranks apart: the slower of two ranks takes {(straggler - 1) * 100:.1f} % longer than their mean for "
                 f"one step's GEMMs in lockstep (torch; dtsim's own OpenBLAS measurement: "
                 f"{(openblas_straggler - 1) * 100:.1f} %, {spread_used}); "
                 "dtsim charges it where the ranks meet")
    lines += [f"- {n}" for n in case_notes]
    lines += ["", "| case | ranks | torch runs (ms) | noise | torch (ms) | NT forward beside its runs (us) | dtsim (ms) "
                  "| error | dtsim execute (ms) | its error | torch's faults a step (MiB) |",
              "|---|---:|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    errors = []
    for name, (ranks, _, _) in cases.items():
        runs = measured[name]
        t = statistics.median(runs)
        err = predicted[name] / t - 1
        errors.append(abs(err))
        ex = executed[name]
        ex_cells = f"{ex * 1e3:.1f} | {(ex / t - 1) * 100:+.1f} %" if ex else "n/a | n/a"
        mark = " (disturbed)" if name in disturbed else ""
        lines.append(f"| {name}{mark} | {ranks} | {', '.join(f'{r * 1e3:.1f}' for r in runs)} | "
                     f"{spread(runs) * 100:.1f} % | {t * 1e3:.1f} | {', '.join(f'{w[0]:.0f}' for w in case_windows[name])} | "
                     f"{predicted[name] * 1e3:.1f} | {err * 100:+.1f} % | "
                     f"{ex_cells} | {statistics.fmean(faults[name]) * 4096 / 2**20:.0f} |")
    verdict = (f"VOID: the machine disturbed torch ({', '.join(disturbed)}: no two of {a.max_runs} runs within "
               f"{a.settle * 100:.0f} %); the errors judge nothing." if disturbed else
               "Every case settled (two runs within "
               f"{a.settle * 100:.0f} %); " + ("both targets met." if statistics.median(errors) <= 0.10
                                                and p90(errors) <= 0.15 else "TARGETS MISSED."))
    lines += ["", f"Median |error| {statistics.median(errors) * 100:.1f} %, p90 {p90(errors) * 100:.1f} % "
                  f"(targets: 10 %, 15 %). {verdict}"]
    lines.append(bucket_ranking(measured, predicted, BUCKET_CASES))
    if interleaved:
        lines += ["", interleaved_intro(interleaved, a), ""] + interleaved_ranking(interleaved["rounds"], BUCKET_CASES, predicted)
    if ranking:
        lines += ["", f"Bucket ranking on the communication-heavy mlp-{ranking[0]}x{ranking[1]} (batch {a.batch} per "
                      f"rank, 2 ranks, {a.ranking_runs} torch runs per bucket size, interleaved; its GEMM points "
                      "timed as above):", ""]
        for i, g in enumerate(ranking_gemms):
            lo, hi = min(w[i] for w in ranking_windows), max(w[i] for w in ranking_windows)
            lines.append(f"- GEMM m={g['m']} n={g['n']} k={g['k']}: " +
                         ", ".join(f"{k} {v:.0f} us" for k, v in g["layouts"].items()) +
                         f" (windows {lo:.0f}-{hi:.0f} us)")
        lines += ["", "| case | torch runs (ms) | torch median (ms) | noise | dtsim (ms) | error | "
                      "torch's faults a step (MiB) |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for name in BUCKET_CASES:
            runs = ranked[name]
            t = statistics.median(runs)
            lines.append(f"| {name} | {', '.join(f'{r * 1e3:.1f}' for r in runs)} | {t * 1e3:.1f} | "
                         f"{spread(runs) * 100:.1f} % | {ranked_predicted[name] * 1e3:.1f} | "
                         f"{(ranked_predicted[name] / t - 1) * 100:+.1f} % | "
                         f"{statistics.fmean(ranked_faults[name]) * 4096 / 2**20:.0f} |")
        lines += ["", bucket_ranking(ranked, ranked_predicted, BUCKET_CASES)]
        if ranked_interleaved:
            lines += ["", interleaved_intro(ranked_interleaved, a), ""] + interleaved_ranking(
                ranked_interleaved["rounds"], BUCKET_CASES, ranked_predicted)
    publish(lines, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
