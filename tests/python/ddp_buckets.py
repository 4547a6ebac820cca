#!/usr/bin/env python3
"""dtsim's DDP buckets against the buckets real torch builds, on CPU.

    python ddp_buckets.py DTSIM

For each MLP and bucket cap (torch's default, and 1, 4, 25 and 100 MiB set
by the user), torch's DistributedDataParallel (gloo, one rank) runs three
steps: the Reducer rebuilds its buckets in gradient-arrival order at the
second, as in every run (reducer.cpp `rebuild_buckets`), and its logging
data reports their sizes from the third
(`_get_ddp_logging_data()["rebuilt_bucket_sizes"]`). `dtsim simulate
--format json` must give the same bucket sizes in the same order. This pins
both of DDP's bucket rules dtsim models: the 1 MiB first bucket by default,
and the user's cap for the first bucket too when bucket_cap_mb is set
(torch 2.4 and later; with an older torch, such as Debian's 1.13, dtsim is
given `first_bucket_mb=1`, the knob that models it).

Exit 0: every case matched; 1: a case differed; 77: torch is not importable
here (ctest reports the test as skipped, with this script's message).
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile

MODELS = [(8, 2048), (5, 1000)]  # 16 MiB layers; 4 MB layers, which no cap divides
CAPS = [None, 1, 4, 25, 100]  # None: torch's default (25 MiB, the first bucket 1 MiB)


def torch_buckets(layers: int, width: int, cap: int | None) -> list[int]:
    import torch
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    mods: list[nn.Module] = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    model = DDP(nn.Sequential(*mods), **({} if cap is None else {"bucket_cap_mb": cap}))
    x = torch.randn(2, width)
    for _ in range(3):  # the rebuild happens at the second forward; the logging data has it from the third
        model(x).sum().backward()
    sizes = model._get_ddp_logging_data().get("rebuilt_bucket_sizes")
    if not sizes:
        raise RuntimeError("torch reported no rebuilt buckets")
    return [int(s) for s in str(sizes).split(",")]


def dtsim_buckets(dtsim: str, layers: int, width: int, cap: int | None, first_is_1mib: bool) -> list[int]:
    cmd = [dtsim, "simulate", "--model", f"mlp-{layers}x{width}", "--hardware", "h100-sxm", "--gpus-per-node", "2",
           "--micro-batch", "2", "--precision", "fp32", "--strategy", "ddp", "--format", "json"]
    if cap is not None:
        cmd += ["--set", f"bucket_cap_mb={cap}"]
        if first_is_1mib:  # torch before 2.4 (Debian's 1.13): the first bucket stays 1 MiB whatever the cap
            cmd += ["--set", "first_bucket_mb=1"]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return [int(b["bytes"]) for b in out["buckets"]]


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: ddp_buckets.py DTSIM", file=sys.stderr)
        return 2
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"SKIP: torch is not importable here ({e}); scripts/make-venv.sh installs it")
        return 77
    torch.set_num_threads(1)
    first_is_1mib = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) < (2, 4)
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group("gloo", init_method=f"file://{d}/store", rank=0, world_size=1)
        try:
            for layers, width in MODELS:
                for cap in CAPS:
                    want = torch_buckets(layers, width, cap)
                    got = dtsim_buckets(sys.argv[1], layers, width, cap, first_is_1mib)
                    label = f"mlp-{layers}x{width}, bucket_cap_mb {'default' if cap is None else cap}"
                    if got == want:
                        print(f"ok: {label}: {len(got)} buckets, {got}")
                    else:
                        failed += 1
                        print(f"FAIL: {label}: torch {torch.__version__} built {want} bytes, dtsim {got}")
        finally:
            dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
