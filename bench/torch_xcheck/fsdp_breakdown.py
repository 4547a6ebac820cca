#!/usr/bin/env python3
"""Where an FSDP step goes, in torch and in dtsim, part by part, on one calibration.

    .venv/bin/python bench/torch_xcheck/fsdp_breakdown.py --dtsim build/ci/cli/dtsim --hardware CAL.json
                                                          [--model 8x2048] [--steps 12] [--out FILE.md]

CAL.json: a gloo calibration of this machine with torch's GEMM points, as steptime.py --keep-calibration writes
it minutes before (the machine drifts; an older one compares two states of it). Same model and settings as
steptime.py's FSDP cases: nn.Sequential of Linear+ReLU, each Linear a unit, batch 64 per rank, SGD, MSELoss, fp32,
2 ranks over gloo, one intra-op thread, zero_grad(set_to_none=True). For FULL_SHARD and SHARD_GRAD_OP it prints,
for torch (unprofiled: wrappers around FSDP's own calls, timed with perf_counter), for dtsim's executor running the
same step for real (`execute --backend gloo --allocator torch --mode train --trace`) and for dtsim's simulator
(`simulate --trace`):

- forward: the all-gathers, and the rest (the layers, FSDP's hooks, the loss);
- backward: the all-gathers, the reduce-scatters (clone, allreduce and chunk copy on gloo), and the rest (the
  layers, the flat gradient, the division, first touch of fresh pages, the hooks);
- the optimizer step and the whole step;
- torch only: its page faults a step by phase, FSDP's hooks outside their collectives, and the Linear forwards in
  the step against the same GEMMs warm right after it (weights cold in cache against warm).

torch's and the executor's figures are medians over steps 5-12 of each rank, then the mean of the two ranks. A
collective's time in torch and in the executor includes waiting for the other rank; the simulator's includes its
straggler wait.
"""
from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dtsim_run import breakdown_args, compilers_running, machine_line, publish, rank_medians, simulated_step  # noqa: E402
from steptime import build_model, spawn_with_retry  # noqa: E402

SHARDINGS = ["FULL_SHARD", "SHARD_GRAD_OP"]
HOOKS_FORWARD = ["_root_pre_forward", "_pre_forward", "_post_forward"]  # fully_sharded_data_parallel's imports
HOOKS_BACKWARD = ["_pre_backward_hook", "_post_backward_hook", "_post_backward_final_callback"]  # _runtime_utils


def worker(rank: int, world: int, init: str, layers: int, width: int, batch: int, sharding: str, steps: int,
           out: str) -> None:
    import resource

    import torch
    import torch.distributed as dist
    import torch.distributed.fsdp._runtime_utils as runtime_utils
    import torch.distributed.fsdp.fully_sharded_data_parallel as fsdp_module
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(1)
    faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt * 4096 / 2**20  # noqa: E731
    phase = ["forward"]
    acc: dict[str, float] = {}
    in_collectives = [0.0]

    def add(key: str, seconds: float) -> None:
        acc[key] = acc.get(key, 0.0) + seconds * 1e3

    def collective(name: str, fn):
        # On CPU FSDP1 calls these without async_op: the call returns when gloo is done.
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            result = fn(*args, **kwargs)
            dt = time.perf_counter() - t0
            in_collectives[0] += dt
            add(f"{phase[0]} {name}", dt)
            return result
        return timed

    def hook(module, name: str):
        fn = getattr(module, name)

        def timed(*args, **kwargs):
            c0, t0 = in_collectives[0], time.perf_counter()
            result = fn(*args, **kwargs)
            add("hooks", time.perf_counter() - t0 - (in_collectives[0] - c0))
            return result
        setattr(module, name, timed)

    # torch 2.15 on CPU: _all_gather_flat_param -> dist.all_gather into the chunks, _reduce_grad ->
    # dist.reduce_scatter_single (docs/notes/torch-gloo-collectives.md).
    dist.all_gather = collective("all-gathers", dist.all_gather)
    dist.reduce_scatter_single = collective("reduce-scatters", dist.reduce_scatter_single)
    for name in HOOKS_FORWARD:
        hook(fsdp_module, name)
    for name in HOOKS_BACKWARD:
        hook(runtime_utils, name)
    inner = build_model(("mlp", layers, width))
    for module in inner.modules():
        if isinstance(module, torch.nn.Linear):
            def forward(x, f=module.forward):
                t0 = time.perf_counter()
                y = f(x)
                add("linear forwards", time.perf_counter() - t0)
                return y
            module.forward = forward
    model = FSDP(inner, sharding_strategy=getattr(ShardingStrategy, sharding),
                 auto_wrap_policy=ModuleWrapPolicy({torch.nn.Linear}), device_id=torch.device("cpu"))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.MSELoss()
    x, y = torch.randn(batch, width), torch.randn(batch, width)
    w, b = torch.randn(width, width), torch.randn(width)
    rows = []
    for _ in range(steps):
        dist.barrier()
        acc.clear()
        f0, t0 = faults(), time.perf_counter()
        phase[0] = "forward"
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        f1, t1 = faults(), time.perf_counter()
        phase[0] = "backward"
        loss.backward()
        f2, t2 = faults(), time.perf_counter()
        opt.step()
        f3, t3 = faults(), time.perf_counter()
        row = dict(acc, step=(t3 - t0) * 1e3, forward=(t1 - t0) * 1e3, backward=(t2 - t1) * 1e3,
                   optimizer=(t3 - t2) * 1e3, **{"faults forward": f1 - f0, "faults backward": f2 - f1,
                                                 "faults optimizer": f3 - f2})
        t4 = time.perf_counter()
        for _ in range(layers):  # the same GEMMs, their weights warm
            torch.nn.functional.linear(x, w, b)
        row["linear forwards warm"] = (time.perf_counter() - t4) * 1e3
        rows.append(row)
    gathered = [None] * world
    dist.all_gather_object(gathered, rows)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(gathered, f)
    dist.destroy_process_group()


def torch_parts(ranks_rows: list[list[dict]], warmup: int) -> dict[str, float]:
    """Each figure's median over the steps after warm-up, per rank, then the ranks' mean."""
    out = rank_medians(ranks_rows, warmup)
    out["forward rest"] = out["forward"] - out.get("forward all-gathers", 0.0)
    out["backward rest"] = out["backward"] - out.get("backward all-gathers", 0.0) - out.get(
        "backward reduce-scatters", 0.0)
    return out


def trace_parts(events: list[dict], start: float, step: float) -> dict[str, float]:
    """One rank's step from a dtsim trace (EVENTS, its complete events; the step starts at START and lasts STEP ms):
    forward ends with its last forward task, backward where the optimizer starts; the collectives by phase."""
    forward_end = max((e["ts"] + e["dur"]) / 1e3 for e in events if e["args"].get("phase") == "forward") - start
    optimizer = [e["ts"] / 1e3 - start for e in events if e["args"].get("phase") == "optimizer"]
    backward_end = min(optimizer) if optimizer else step
    out = {"step": step, "forward": forward_end, "backward": backward_end - forward_end,
           "optimizer": step - backward_end}
    for e in events:
        name = e["name"]
        kind = ("all-gathers" if name.startswith("allgather") else
                "reduce-scatters" if name.startswith("reduce_scatter") else None)
        if kind:
            where = "forward" if e["ts"] / 1e3 - start < forward_end else "backward"
            out[f"{where} {kind}"] = out.get(f"{where} {kind}", 0.0) + e["dur"] / 1e3
    out["forward rest"] = out["forward"] - out.get("forward all-gathers", 0.0)
    out["backward rest"] = out["backward"] - out.get("backward all-gathers", 0.0) - out.get(
        "backward reduce-scatters", 0.0)
    return out


def model_args(a, sharding: str) -> list[str]:
    """The case as dtsim's commands take it: steptime.py's FSDP case, one unit a Linear."""
    return ["--model", f"mlp-{a.layers}x{a.width}", "--micro-batch", str(a.batch), "--precision", "fp32",
            "--optimizer", "sgd", "--strategy", "fsdp", "--set", f"sharding_strategy={sharding}", "--set",
            "auto_wrap_policy=size", "--set", f"min_num_params={a.width * a.width}"]


def dtsim_parts(dtsim: str, hardware: str, a, sharding: str, workdir: str) -> dict[str, float]:
    """The same parts from dtsim's trace of one rank (pid 0), in ms."""
    cmd = [dtsim, "simulate", "--hardware", hardware, "--nodes", "1", "--gpus-per-node", "2"] + model_args(a, sharding)
    out, events, _ = simulated_step(cmd, os.path.join(workdir, f"{sharding}.json"))
    return trace_parts(events, 0.0, out["step"])


def executed_parts(dtsim: str, a, sharding: str, workdir: str) -> dict[str, float] | None:
    """The same parts from dtsim's executor running the step on 2 ranks as torch's allocator would (its trace: each
    rank's steps after warm-up), or None where it failed."""
    trace = os.path.join(workdir, f"{sharding}-executed.json")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1")
    cmd = ["mpirun", "-np", "2", "--oversubscribe", "--bind-to", "none", dtsim, "execute", "--backend", "gloo",
           "--allocator", "torch", "--mode", "train", "--steps", str(a.steps), "--format", "json",
           "--trace", trace] + model_args(a, sharding)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(f"dtsim execute failed for {sharding}: {r.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    with open(trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    ranks_rows = []
    for rank in sorted({e["pid"] for e in events}):
        rows = []
        for s in range(a.steps):
            ev = [e for e in events if e["pid"] == rank and e["args"].get("step") == s]
            start = min(e["ts"] for e in ev) / 1e3
            rows.append(trace_parts(ev, start, max(e["ts"] + e["dur"] for e in ev) / 1e3 - start))
        ranks_rows.append(rows)
    return rank_medians(ranks_rows, 4)


PARTS = [("forward all-gathers", "forward: all-gathers"), ("forward rest", "forward: the rest"),
         ("backward all-gathers", "backward: all-gathers"), ("backward reduce-scatters", "backward: reduce-scatters"),
         ("backward rest", "backward: the rest"), ("optimizer", "optimizer step"), ("step", "step")]


def main() -> int:
    a = breakdown_args("fsdp_breakdown.py", __doc__.split("\n\n")[0])
    if a is None:
        return 2
    started, busy = time.time(), compilers_running()
    import torch

    lines = [f"### {datetime.date.today()}: where an FSDP step goes, torch {torch.__version__} against dtsim "
             f"(mlp-{a.model}, batch {a.batch} per rank, 2 ranks, gloo)", ""]
    notes = []
    with tempfile.TemporaryDirectory() as workdir:
        for sharding in SHARDINGS:
            print(f"torch: FSDP {sharding}", file=sys.stderr)
            ranks_rows = spawn_with_retry(worker, (a.layers, a.width, a.batch, sharding, a.steps), 2, "rows.json")
            t = torch_parts(ranks_rows, 4)
            print(f"dtsim execute: FSDP {sharding}", file=sys.stderr)
            x = executed_parts(a.dtsim, a, sharding, workdir)
            d = dtsim_parts(a.dtsim, a.hardware, a, sharding, workdir)
            lines += [f"**{sharding}**", "", "| part | torch (ms) | dtsim execute (ms) | execute - torch (ms) | "
                      "dtsim simulate (ms) | simulate - torch (ms) |", "|---|---:|---:|---:|---:|---:|"]
            for key, label in PARTS:
                tv, dv = t.get(key, 0.0), d.get(key, 0.0)
                xv = f"{x.get(key, 0.0):.1f} | {x.get(key, 0.0) - tv:+.1f}" if x else "failed | "
                lines.append(f"| {label} | {tv:.1f} | {xv} | {dv:.1f} | {dv - tv:+.1f} |")
            lines.append("")
            notes.append(
                f"- {sharding}, torch only: page faults a step {t['faults forward']:.0f} MiB in forward, "
                f"{t['faults backward']:.0f} in backward, {t['faults optimizer']:.0f} in the optimizer; FSDP's hooks "
                f"outside their collectives {t.get('hooks', 0.0):.1f} ms a step; the Linear forwards "
                f"{t.get('linear forwards', 0.0):.1f} ms in the step against {t['linear forwards warm']:.1f} ms warm "
                f"right after it ({t.get('linear forwards', 0.0) / t['linear forwards warm']:.2f}x).")
    lines += notes
    lines += ["", f"{machine_line(busy)} Calibration: {os.path.basename(a.hardware)}. "
              f"Run time {time.time() - started:.0f} s."]
    publish(lines, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
