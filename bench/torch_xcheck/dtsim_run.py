"""What collectives.py, steptime.py and from_trace.py share: running dtsim's calibration, summarising errors
and bucket rankings, and publishing a table."""
from __future__ import annotations

import json
import os
import statistics
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


def p90(errors: list[float]) -> float:
    """The 90th percentile of |error| (nearest rank)."""
    e = sorted(errors)
    return e[min(len(e) - 1, int(round(0.9 * (len(e) - 1))))]


def spread(runs: list[float]) -> float:
    """A case's run-to-run noise: its slowest run minus its fastest over their mean."""
    return (max(runs) - min(runs)) / statistics.fmean(runs)


def bucket_ranking(measured: dict[str, list[float]], predicted: dict[str, float], cases: list[str]) -> str:
    """Whether dtsim orders the bucket sizes as torch does, over the pairs torch separates by more than its
    run-to-run noise (the largest spread of any case's runs); each case's torch figure is the median of its runs.
    One line for the table."""
    noise = max(spread(measured[n]) for n in cases)
    agree, compared = 0, 0
    for i, p in enumerate(cases):
        for q in cases[i + 1:]:
            tp, tq = statistics.median(measured[p]), statistics.median(measured[q])
            if abs(tp - tq) / min(tp, tq) <= noise:
                continue
            compared += 1
            agree += (tp < tq) == (predicted[p] < predicted[q])
    return (f"Bucket sizes: torch's run-to-run noise {noise * 100:.1f} %; of the {compared} pairs torch separates "
            f"by more than that, dtsim orders {agree} as torch does.")
