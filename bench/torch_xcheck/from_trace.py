#!/usr/bin/env python3
"""`dtsim simulate --from-trace` against real torch, end to end, in one run.

    .venv/bin/python bench/torch_xcheck/from_trace.py --dtsim build/ci/cli/dtsim [--out FILE.md]

Needs the venv of scripts/make-venv.sh and a built dtsim; never builds.

1. Profile: torch (PyPI 2.x, CPU, one intra-op thread) trains a small
   transformer (nn.TransformerEncoder, batch_first, MSELoss, SGD) on one rank
   with no process group, under torch.profiler (record_shapes=True,
   profile_memory=True). The trace is what a user would bring.
2. torch: the same model and batch under DDP on 2 ranks over gloo, with
   bucket_cap_mb 1, 25 and 100 and with the fp16 compression hook (default
   buckets); DDP on 1 rank too; FSDP FULL_SHARD and SHARD_GRAD_OP with the
   root as its one unit. Each case runs twice; a case's figure is the
   median step after warm-up, slower rank (steptime.py's harness).
3. dtsim: `calibrate --backend gloo` (the transport torch uses), then
   `simulate --from-trace TRACE` with each case's strategy and knobs. The
   trace's ops are priced at their measured times; only the collectives, the
   reducer's copies and the hook's casts come from the calibration.
4. It prints each prediction's error and the median and largest |error|
   (target: every case within 10 %), the profiled step against the same
   model's unprofiled step (the profiler's own overhead), and whether dtsim
   ranks the bucket sizes as torch does. This machine's speed drifts 10-20 %
   within seconds, so the unprofiled one-rank step is timed in a window
   before each torch run, and dtsim is handed their median
   (`--unprofiled-step-ms`, as a user would read a step from a training
   log); the predictions from the profile alone are printed beside.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from dtsim_run import bucket_ranking, calibrate, compilers_running, publish
from steptime import build_model, model_input_shape, run_torch_case, train_step

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# name -> (ranks, torch wrapper arguments (DDP's, a hook, or FSDP's sharding and wrap), dtsim strategy and --set knobs).
# FSDP wraps the root only (no auto_wrap_policy): one unit, as dtsim's auto_wrap_policy=none.
CASES = {
    "DDP 1 rank": (1, {}, ["ddp"]),
    "bucket 1 MiB": (2, {"bucket_cap_mb": 1}, ["ddp", "bucket_cap_mb=1"]),
    "bucket 25 MiB": (2, {"bucket_cap_mb": 25}, ["ddp", "bucket_cap_mb=25"]),
    "bucket 100 MiB": (2, {"bucket_cap_mb": 100}, ["ddp", "bucket_cap_mb=100"]),
    "fp16 hook": (2, {"hook": "fp16"}, ["ddp", "comm_hook=fp16_compress"]),
    "FSDP FULL_SHARD, one unit": (2, {"fsdp": "FULL_SHARD", "fsdp_wrap": "none"},
                                  ["fsdp", "sharding_strategy=FULL_SHARD", "auto_wrap_policy=none"]),
    "FSDP SHARD_GRAD_OP, one unit": (2, {"fsdp": "SHARD_GRAD_OP", "fsdp_wrap": "none"},
                                     ["fsdp", "sharding_strategy=SHARD_GRAD_OP", "auto_wrap_policy=none"]),
}
BUCKET_CASES = ["bucket 1 MiB", "bucket 25 MiB", "bucket 100 MiB"]


def one_rank(spec: tuple, batch: int):
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = build_model(spec)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.MSELoss()
    x = torch.randn(*model_input_shape(spec, batch))
    y = torch.randn(*model_input_shape(spec, batch))
    return model, opt, loss_fn, x, y


def plain_step(spec: tuple, batch: int, steps: int = 6) -> float:
    """The model's median step on one rank, no profiler and no process group: a timing window."""
    model, opt, loss_fn, x, y = one_rank(spec, batch)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        train_step(model, opt, loss_fn, x, y)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[2:])


def profile_one_rank(spec: tuple, batch: int, out_dir: str) -> str:
    """Trains `spec` on one rank under torch.profiler; returns the trace's path."""
    from torch.profiler import ProfilerActivity, profile, schedule

    model, opt, loss_fn, x, y = one_rank(spec, batch)
    for _ in range(2):
        train_step(model, opt, loss_fn, x, y)
    path = os.path.join(out_dir, "rank0.pt.trace.json")

    def write(prof):
        prof.export_chrome_trace(path)

    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=2, active=5, repeat=1),
                 record_shapes=True, profile_memory=True, with_stack=False, on_trace_ready=write) as prof:
        for _ in range(8):
            train_step(model, opt, loss_fn, x, y)
            prof.step()
    return path


def dtsim_predict(dtsim: str, trace: str, hardware: str, ranks: int, knobs: list[str], batch: int,
                  unprofiled_s: float | None, strategy: str = "ddp") -> dict:
    """`simulate --from-trace --format json` for `strategy` with `knobs` (--set) on `ranks` ranks."""
    cmd = [dtsim, "simulate", "--from-trace", trace, "--hardware", hardware, "--nodes", "1", "--gpus-per-node",
           str(ranks), "--strategy", strategy, "--micro-batch", str(batch), "--precision", "fp32", "--optimizer", "sgd",
           "--format", "json"]
    if unprofiled_s:
        cmd += ["--unprofiled-step-ms", f"{unprofiled_s * 1e3:.3f}"]
    for k in knobs:
        cmd += ["--set", k]
    r = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(r.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtsim", default=os.path.join(ROOT, "build", "ci", "cli", "dtsim"))
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8, help="samples per rank")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--quick-calibration", action="store_true", help="calibrate --quick (collectives to 1 MiB only)")
    ap.add_argument("--trace-out", help="keep the one-rank profile in this directory")
    ap.add_argument("--out", help="append the table to this markdown file")
    a = ap.parse_args()
    if not os.access(a.dtsim, os.X_OK):
        print(f"from_trace.py: {a.dtsim} is not an executable dtsim; build it first", file=sys.stderr)
        return 2
    import torch

    spec = ("transformer", a.layers, a.d_model, a.heads, a.seq)
    busy = compilers_running()
    started = time.time()
    with tempfile.TemporaryDirectory() as d:
        trace_dir = a.trace_out or d
        os.makedirs(trace_dir, exist_ok=True)
        print("torch: profiling one rank", file=sys.stderr)
        windows = [plain_step(spec, a.batch)]
        trace = profile_one_rank(spec, a.batch, trace_dir)
        windows.append(plain_step(spec, a.batch))
        profile_windows = list(windows)
        measured: dict[str, list[float]] = {}
        for rep in range(2):
            for name, (ranks, kwargs, _) in CASES.items():
                print(f"torch: {name} (run {rep + 1})", file=sys.stderr)
                windows.append(plain_step(spec, a.batch))  # the machine's speed beside each run
                measured.setdefault(name, []).append(run_torch_case(ranks, kwargs, a, spec))
        unprofiled = statistics.median(windows)
        cal = calibrate(a.dtsim, "gloo", d, a.quick_calibration)
        hardware = os.path.join(d, "gloo.json")
        if a.trace_out:
            shutil.copy(hardware, os.path.join(a.trace_out, "gloo.json"))
        # With the step's unprofiled time (what a training log shows), and from the profile alone.
        predicted = {name: dtsim_predict(a.dtsim, trace, hardware, ranks, knobs[1:], a.batch, unprofiled, knobs[0])
                     for name, (ranks, _, knobs) in CASES.items()}
        raw = {name: dtsim_predict(a.dtsim, trace, hardware, ranks, knobs[1:], a.batch, None, knobs[0])
               for name, (ranks, _, knobs) in CASES.items()}
    first = next(iter(predicted.values()))["from_trace"]
    profiled_step = first["measured_step_time_s"]
    lines = [f"## {datetime.date.today()}: `simulate --from-trace` against torch {torch.__version__} DDP and FSDP "
             f"(transformer {a.layers} x d_model {a.d_model}, {a.heads} heads, seq {a.seq}, batch {a.batch} per rank, "
             "SGD, fp32, gloo)", "",
             f"Machine: {platform.node()} ({os.cpu_count()} cores). Compilers running at the start: {busy}. "
             f"Run time {time.time() - started:.0f} s. The profile: one rank, no process group, "
             f"{first['parameters']:,} parameters read as {first['layers']} layers; dtsim read ProfilerStep#"
             f"{first['step']} ({profiled_step * 1e3:.1f} ms; the same model's unprofiled step "
             f"{statistics.fmean(profile_windows) * 1e3:.1f} ms just before and after the profile, so the profiler "
             f"adds {(profiled_step / statistics.fmean(profile_windows) - 1) * 100:+.1f} %). "
             f"The unprofiled step, timed in a window before each torch run, has median {unprofiled * 1e3:.1f} ms "
             f"(range {min(windows) * 1e3:.1f}-{max(windows) * 1e3:.1f} ms: the machine's drift). "
             f"Hardware: `calibrate --backend gloo`{' --quick' if a.quick_calibration else ''} "
             f"({cal['name']}). torch: median step of steps {a.warmup + 1}-{a.steps}, slower rank, two runs per case.",
             "", "dtsim is given that median (`--unprofiled-step-ms`, as a training log shows a step), which "
             f"takes the profiler's cost off each op ({first['profiler_us_per_op']:.1f} us per recorded op); the last "
             "columns are from the profile alone.", "",
             "| case | ranks | torch run 1 (ms) | torch run 2 (ms) | noise | dtsim (ms) | error "
             "| profile alone (ms) | its error |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    errors = []
    for name, (ranks, _, _) in CASES.items():
        t1, t2 = measured[name]
        t = (t1 + t2) / 2
        p = predicted[name]["step_time_s"]
        err = p / t - 1
        errors.append(abs(err))
        r = raw[name]["step_time_s"]
        lines.append(f"| {name} | {ranks} | {t1 * 1e3:.1f} | {t2 * 1e3:.1f} | {abs(t1 - t2) / t * 100:.1f} % | "
                     f"{p * 1e3:.1f} | {err * 100:+.1f} % | {r * 1e3:.1f} | {(r / t - 1) * 100:+.1f} % |")
    lines += ["", f"Median |error| {statistics.median(errors) * 100:.1f} %, largest {max(errors) * 100:.1f} % "
                  "(target: every case within 10 %)."]
    lines.append(bucket_ranking(measured, {n: predicted[n]["step_time_s"] for n in CASES}, BUCKET_CASES))
    publish(lines, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
