"""What emitted_torch.py and emitted_lightning.py share: dtsim's emitted code for one configuration, and
the knob values the test asked for."""
from __future__ import annotations

import os
import subprocess
import tempfile


def emit(dtsim: str, target: str, axes: list[str]) -> str:
    """`dtsim advise --emit TARGET` for gpt2 on 2 GPUs, its search space pinned by `axes` (key=value)."""
    cmd = [dtsim, "advise", "--model", "gpt2", "--gpus-per-node", "2", "--micro-batch", "2", "--emit", target]
    for a in axes:
        cmd += ["--axis", a]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "emitted")
        subprocess.run(cmd + ["--emit-out", out], check=True, capture_output=True, text=True)
        with open(out) as f:
            return f.read()


def knob(axes: list[str], key: str, default: str) -> str:
    """The value `axes` gives `key`, else `default`."""
    for a in axes:
        k, _, v = a.partition("=")
        if k == key:
            return v
    return default
