"""What collectives.py and steptime.py share: running dtsim's calibration and publishing a table."""
from __future__ import annotations

import json
import os
import subprocess
import sys


def compilers_running() -> str:
    """`pgrep -c cc1plus`: timings taken while a compiler runs are worthless on this 2-core machine."""
    return subprocess.run(["pgrep", "-c", "cc1plus"], capture_output=True, text=True).stdout.strip() or "0"


def calibrate(dtsim: str, backend: str, workdir: str, quick: bool) -> dict:
    """`mpirun -np 2 dtsim calibrate --backend BACKEND` into WORKDIR; returns the calibration's JSON."""
    out = os.path.join(workdir, f"{backend}.json")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1")
    cmd = ["mpirun", "-np", "2", "--oversubscribe", dtsim, "calibrate", "--backend", backend, "--io-dir", workdir,
           "--out", out] + (["--quick"] if quick else [])
    print("running:", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def publish(lines: list[str], out: str | None) -> None:
    """Prints the markdown and, with --out, appends it to that file."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        with open(out, "a") as f:
            f.write("\n" + text)
