#!/usr/bin/env python3
"""Produce real torch.profiler (Kineto) Chrome traces on the CPU, for dtsim's trace-reader tests.

Run it with the venv made by scripts/make-venv.sh:

    scripts/make-venv.sh
    .venv/bin/python scripts/torch_traces.py                 # every case into tests/data/torch/
    .venv/bin/python scripts/torch_traces.py --cases ddp_mlp --out /tmp/t

Every multi-rank case runs 2 ranks started by torch.multiprocessing on
127.0.0.1 (loopback only, GLOO_SOCKET_IFNAME=lo) with the gloo backend, one
intra-op and one inter-op thread per rank. The profiler records CPU activity
with schedule(wait=1, warmup=1, active=3), record_shapes=True,
profile_memory=True, with_stack=False, so each trace holds ProfilerStep#2..#4.
Each rank writes <out>/<case>/rank<N>.pt.trace.json, gzipped to
rank<N>.pt.trace.json.gz when the plain file would reach --gzip-over bytes.

This is test-data generation only; dtsim never imports torch.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, schedule

WAIT, WARMUP, ACTIVE = 1, 1, 3
STEPS = WAIT + WARMUP + ACTIVE + 1  # one more step so the schedule closes and on_trace_ready fires

CASES = {
    # name: (world size, model, wrapper, description)
    "ddp_mlp": (2, "mlp", "ddp",
                "DDP on the MLP (4 x Linear(512,512)+ReLU, batch 32 per rank), default buckets (bucket_cap_mb=None)"),
    "ddp_mlp_bucket1mb": (2, "mlp", "ddp_bucket1mb",
                          "the same DDP MLP with bucket_cap_mb=1"),
    "ddp_mlp_fp16hook": (2, "mlp", "ddp_fp16hook",
                         "the same DDP MLP with default_hooks.fp16_compress_hook registered"),
    "fsdp2_mlp": (2, "mlp", "fsdp2",
                  "FSDP2 fully_shard (FULL_SHARD: reshard_after_forward=True) on each Linear and on the root of the MLP"),
    "fsdp1_mlp": (2, "mlp", "fsdp1",
                  "FSDP1 FullyShardedDataParallel, ShardingStrategy.FULL_SHARD, each Linear wrapped (ModuleWrapPolicy), on the MLP"),
    "transformer_1rank": (1, "transformer", "none",
                          "one rank, no process group: nn.TransformerEncoder, 2 layers, d_model 256, 4 heads, "
                          "ffn 1024, seq 64, batch 8 (no distributedInfo expected)"),
    "ddp_transformer": (2, "transformer", "ddp",
                        "DDP (default buckets) on the same transformer, batch 8 per rank"),
}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_model(kind: str):
    torch.manual_seed(0)
    if kind == "mlp":
        layers = []
        for _ in range(4):
            layers += [nn.Linear(512, 512), nn.ReLU()]
        model = nn.Sequential(*layers)

        def batch(step: int):
            g = torch.Generator().manual_seed(1000 + step)
            return torch.randn(32, 512, generator=g), torch.randn(32, 512, generator=g)
        return model, batch
    if kind == "transformer":
        layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, dropout=0.0,
                                           batch_first=True)
        model = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)

        def batch(step: int):
            g = torch.Generator().manual_seed(1000 + step)
            return torch.randn(8, 64, 256, generator=g), torch.randn(8, 64, 256, generator=g)
        return model, batch
    raise ValueError(kind)


def wrap(model: nn.Module, wrapper: str) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel as DDP
    if wrapper == "none":
        return model
    if wrapper == "ddp":
        return DDP(model)
    if wrapper == "ddp_bucket1mb":
        return DDP(model, bucket_cap_mb=1)
    if wrapper == "ddp_fp16hook":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        m = DDP(model)
        m.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)
        return m
    if wrapper == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        for sub in model:
            if isinstance(sub, nn.Linear):
                fully_shard(sub, mesh=mesh, reshard_after_forward=True)
        fully_shard(model, mesh=mesh, reshard_after_forward=True)
        return model
    if wrapper == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        return FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD,
                    auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), device_id=torch.device("cpu"))
    raise ValueError(wrapper)


def write_trace(prof, out_dir: str, rank: int, gzip_over: int) -> str:
    os.makedirs(out_dir, exist_ok=True)
    for old in (f"rank{rank}.pt.trace.json", f"rank{rank}.pt.trace.json.gz"):
        try:
            os.remove(os.path.join(out_dir, old))
        except FileNotFoundError:
            pass
    fd, tmp = tempfile.mkstemp(suffix=".pt.trace.json")
    os.close(fd)
    prof.export_chrome_trace(tmp)
    size = os.path.getsize(tmp)
    if size < gzip_over:
        dst = os.path.join(out_dir, f"rank{rank}.pt.trace.json")
        shutil.move(tmp, dst)
    else:
        dst = os.path.join(out_dir, f"rank{rank}.pt.trace.json.gz")
        # mtime=0 and no file name in the header: the same trace gives the same bytes.
        with open(tmp, "rb") as fin, open(dst, "wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as fout:
            shutil.copyfileobj(fin, fout)
        os.remove(tmp)
    return dst


def worker(rank: int, world: int, case: str, out_root: str, port: int, gzip_over: int) -> None:
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    _, model_kind, wrapper, _ = CASES[case]
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    model, batch = make_model(model_kind)
    model = wrap(model, wrapper)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    out_dir = os.path.join(out_root, case)
    written = []

    def on_ready(p):
        written.append(write_trace(p, out_dir, rank, gzip_over))

    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
                 on_trace_ready=on_ready, record_shapes=True, profile_memory=True,
                 with_stack=False) as prof:
        for step in range(STEPS):
            x, y = batch(step * world + rank)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            prof.step()
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    for w in written:
        print(f"  rank {rank}: {w} ({os.path.getsize(w)} bytes)", flush=True)


def check_trace(path: str, world: int) -> list[str]:
    """The properties the tests rely on; returns a list of problems (empty when fine)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    problems = []
    evs = doc.get("traceEvents")
    if not evs:
        return ["no traceEvents"]
    steps = [e for e in evs if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")]
    if len(steps) != ACTIVE:
        problems.append(f"{len(steps)} ProfilerStep# user_annotations, expected {ACTIVE}")
    if not any(e.get("name") == "[memory]" for e in evs):
        problems.append("no [memory] events")
    if world > 1:
        di = doc.get("distributedInfo")
        if not di or di.get("world_size") != world:
            problems.append(f"distributedInfo missing or wrong: {di}")
        # One tid can carry two thread_name events ("thread N (pt_gloo_runloop)" and "thread N (python)").
        tnames: dict = {}
        for e in evs:
            if e.get("ph") == "M" and e.get("name") == "thread_name":
                tnames.setdefault((e.get("pid"), e.get("tid")), set()).add(e["args"].get("name", ""))
        gloo = [e for e in evs if str(e.get("name", "")).startswith("gloo:")]
        if not gloo:
            problems.append("no gloo:* events")
        elif not all(any("pt_gloo_runloop" in n for n in tnames.get((e.get("pid"), e.get("tid")), ()))
                     for e in gloo):
            problems.append("some gloo:* events are not on pt_gloo_runloop threads")
        if not any(e.get("cat") == "cpu_op" and str(e.get("name", "")).startswith("c10d::") for e in evs):
            problems.append("no c10d::* cpu_op enqueues")
    elif "distributedInfo" in doc:
        problems.append("one-rank run has distributedInfo")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--out", default=os.path.join(here, "tests", "data", "torch"))
    ap.add_argument("--cases", default=",".join(CASES), help="comma list of: " + ", ".join(CASES))
    ap.add_argument("--gzip-over", type=int, default=512 * 1024,
                    help="gzip a trace whose plain JSON is at least this many bytes (default 512 KiB)")
    args = ap.parse_args()

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}, out {args.out}")
    failed = []
    for case in args.cases.split(","):
        world, _, _, desc = CASES[case]
        print(f"{case}: {desc}", flush=True)
        t0 = time.time()
        mp.spawn(worker, args=(world, case, args.out, free_port(), args.gzip_over), nprocs=world, join=True)
        for r in range(world):
            d = os.path.join(args.out, case)
            cand = [os.path.join(d, f"rank{r}.pt.trace.json{s}") for s in ("", ".gz")]
            path = next((c for c in cand if os.path.exists(c)), None)
            if path is None:
                failed.append(f"{case} rank {r}: no trace written")
                continue
            size = os.path.getsize(path)
            problems = check_trace(path, world)
            if size >= 2 * 1024 * 1024:
                problems.append(f"{size} bytes >= 2 MiB")
            for p in problems:
                failed.append(f"{case} rank {r}: {p}")
            print(f"  check rank {r}: {'ok' if not problems else '; '.join(problems)}")
        print(f"  {time.time() - t0:.1f} s", flush=True)
    if failed:
        print("FAILED:\n  " + "\n  ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
