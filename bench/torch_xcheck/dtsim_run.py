"""What collectives.py, steptime.py, from_trace.py and the breakdown scripts share: running dtsim's calibration and
its simulated step, summarising errors, bucket rankings and per-rank step figures, and publishing a table."""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys


def compilers_running() -> str:
    """`pgrep -c cc1plus`: timings taken while a compiler runs are worthless on this 2-core machine."""
    return subprocess.run(["pgrep", "-c", "cc1plus"], capture_output=True, text=True).stdout.strip() or "0"


def breakdown_args(prog: str, description: str, knobs=None) -> argparse.Namespace | None:
    """The options fsdp_breakdown.py and hook_breakdown.py share, parsed and
    checked; `knobs(ap)` adds a script's own. None (after a one-line error) when
    they are wrong."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("--dtsim", required=True, help="a built dtsim")
    ap.add_argument("--hardware", required=True, help="the calibration dtsim simulates with (steptime.py's "
                                                      "--keep-calibration)")
    ap.add_argument("--model", default="8x2048", help="LxW of the MLP (8x2048)")
    if knobs:
        knobs(ap)
    ap.add_argument("--batch", type=int, default=64, help="samples per rank (64)")
    ap.add_argument("--steps", type=int, default=12, help="steps a run (12; the first 4 are warm-up)")
    ap.add_argument("--out", help="append the tables to this markdown file")
    a = ap.parse_args()
    try:
        a.layers, a.width = (int(v) for v in a.model.split("x"))
    except ValueError:
        print(f"{prog}: --model {a.model!r}: expected LxW, for example 8x2048", file=sys.stderr)
        return None
    if a.steps < 6:
        print(f"{prog}: --steps must be at least 6 (4 are warm-up)", file=sys.stderr)
        return None
    for path, what in ((a.dtsim, "an executable dtsim"), (a.hardware, "a calibration file")):
        if not os.path.exists(path):
            print(f"{prog}: {path} is not {what}", file=sys.stderr)
            return None
    return a


def calibrate(dtsim: str, backend: str, workdir: str, quick: bool, extra: tuple[str, ...] = ()) -> dict:
    """`mpirun -np 2 dtsim calibrate --backend BACKEND [EXTRA...]` into WORKDIR; returns the calibration's JSON."""
    out = os.path.join(workdir, f"{backend}.json")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OPENBLAS_NUM_THREADS="1")
    cmd = ["mpirun", "-np", "2", "--oversubscribe", dtsim, "calibrate", "--backend", backend, "--io-dir", workdir,
           "--out", out] + (["--quick"] if quick else []) + list(extra)
    print("running:", " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def simulated_step(cmd: list[str], trace: str) -> tuple[dict[str, float], list[dict], dict[int, str]]:
    """Runs `dtsim simulate` (CMD, which must not name --trace or --format) with a trace of rank 0 written to TRACE.
    Returns the step's phases in ms (step, forward, backward, optimizer; backward ends where the optimizer starts),
    rank 0's complete events, and its streams' names by thread id."""
    out = subprocess.run(cmd + ["--trace", trace, "--format", "json"], check=True, capture_output=True, text=True)
    step = json.loads(out.stdout)["step_time_s"] * 1e3
    with open(trace) as f:
        every = [e for e in json.load(f)["traceEvents"] if e.get("pid") == 0]
    threads = {e["tid"]: e["args"]["name"] for e in every if e.get("ph") == "M" and e["name"] == "thread_name"}
    events = [e for e in every if e.get("ph") == "X"]
    forward_end = max((e["ts"] + e["dur"]) / 1e3 for e in events if e["args"].get("phase") == "forward")
    optimizer = [e["ts"] / 1e3 for e in events if e["args"].get("phase") == "optimizer"]
    backward_end = min(optimizer) if optimizer else step
    phases = {"step": step, "forward": forward_end, "backward": backward_end - forward_end,
              "optimizer": step - backward_end}
    return phases, events, threads


def rank_medians(ranks_rows: list[list[dict]], warmup: int) -> dict[str, float]:
    """Each figure's median over the steps after WARMUP, per rank, then the ranks' mean (a figure a step lacks is 0)."""
    keys = sorted({k for rows in ranks_rows for row in rows for k in row})
    return {k: statistics.fmean(statistics.median(row.get(k, 0.0) for row in rows[warmup:]) for rows in ranks_rows)
            for k in keys}


def machine_line(busy: str) -> str:
    """The first words of a table's footer: the machine, its cores, and the compilers running when timing began."""
    import platform
    return f"Machine: {platform.node()} ({os.cpu_count()} cores). Compilers running at the start: {busy}."


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


# dtsim's two predictions closer than this (relative) are a tie: the calibration's own noise moves them more.
TIE = 0.01


def bucket_ranking(measured: dict[str, list[float]], predicted: dict[str, float], cases: list[str]) -> str:
    """Whether dtsim orders the bucket sizes as torch does, over the pairs torch itself separates; one paragraph.

    A pair counts when torch's medians differ by more than its run-to-run noise (the largest spread of any case's
    runs) and, besides, every run of one case is faster than every run of the other. Medians alone counted pairs
    whose runs interleave: run P (stop 37) separated 1 MiB from 100 MiB by 9.7 % of medians against 9.3 % noise,
    while one 1 MiB run (371.0 ms) was slower than one 100 MiB run (367.8 ms), so torch's own runs ordered the pair
    both ways. With four runs a case, runs that fall wholly apart by chance happen 2 times in 70 (a rank-sum test
    at 2.9 %), with three 2 in 20. dtsim's two predictions within 1 % of each other are a tie, printed as such and
    not counted as agreeing."""
    noise = max(spread(measured[n]) for n in cases)
    agree, compared, ties = 0, 0, 0
    pairs = []
    for i, p in enumerate(cases):
        for q in cases[i + 1:]:
            rp, rq = measured[p], measured[q]
            tp, tq = statistics.median(rp), statistics.median(rq)
            apart = abs(tp - tq) / min(tp, tq)
            disjoint = max(rp) < min(rq) or max(rq) < min(rp)
            if apart <= noise or not disjoint:
                continue
            compared += 1
            dp, dq = predicted[p], predicted[q]
            tie = abs(dp - dq) / min(dp, dq) < TIE
            same = not tie and (tp < tq) == (dp < dq)
            ties += tie
            agree += same
            fast, slow = (p, q) if tp < tq else (q, p)
            pairs.append(f"{fast} faster than {slow} by {apart * 100:.1f} % (torch {min(tp, tq) * 1e3:.1f} against "
                         f"{max(tp, tq) * 1e3:.1f} ms; dtsim {predicted[fast] * 1e3:.1f} against "
                         f"{predicted[slow] * 1e3:.1f} ms: " + ("a tie" if tie else "the same order" if same else
                                                             "the other order") + ")")
    line = (f"Bucket sizes: torch's run-to-run noise {noise * 100:.1f} %; of the {compared} pairs torch separates "
            f"(medians apart by more than that, and every run of one faster than every run of the other), dtsim "
            f"orders {agree} as torch does" + (f" and ties {ties}" if ties else "") + ".")
    return line + "".join(f"\n- {x}" for x in pairs)


def sign_test(k: int, n: int) -> float:
    """Two-sided sign test: the chance of k or more of n rounds (or as few) on one side when neither side is
    favoured."""
    tail = sum(math.comb(n, i) for i in range(max(k, n - k), n + 1)) / 2**n
    return min(1.0, 2 * tail)


def interleaved_ranking(table: list[list[float]], cases: list[str], predicted: dict[str, float]) -> list[str]:
    """The bucket ranking from interleaved rounds (steptime.py's run_interleaved): per pair, each round's ratio of
    the two sizes' step times. Torch separates a pair when one size is the faster in so many rounds that chance
    would give it at most 5 % of the time (the two-sided sign test); its noise is the spread of the rounds' ratios
    (p10 to p90). dtsim's two predictions within 1 % of each other are a tie, not counted as agreeing. Markdown
    lines: a table and a verdict."""
    rounds = len(table)
    lines = ["| pair | torch: faster/slower, median over rounds | rounds the faster won | its p10-p90 | sign test | "
             "dtsim: the same ratio | order |", "|---|---:|---:|---:|---:|---:|---|"]
    compared = agree = ties = 0
    for i, p in enumerate(cases):
        for j in range(i + 1, len(cases)):
            q = cases[j]
            ratios = [row[i] / row[j] for row in table]
            med = statistics.median(ratios)
            fast, slow = (p, q) if med < 1 else (q, p)
            r = sorted(x if med < 1 else 1 / x for x in ratios)  # faster/slower, each round
            won = sum(x < 1 for x in r)
            pval = sign_test(won, rounds)
            lo, hi = r[int(0.1 * (rounds - 1))], r[int(round(0.9 * (rounds - 1)))]
            dratio = predicted[fast] / predicted[slow]
            tie = abs(dratio - 1) < TIE
            if pval <= 0.05:
                compared += 1
                ties += tie
                agree += not tie and dratio < 1
                order = "a tie" if tie else "the same" if dratio < 1 else "the other"
            else:
                order = "not separated"
            lines.append(f"| {fast} / {slow} | {statistics.median(r):.3f} | {won} of {rounds} | {lo:.3f}-{hi:.3f} | "
                         f"p = {pval:.3f} | {dratio:.3f} | {order} |")
    lines += ["", f"Interleaved bucket ranking: of the {compared} pairs torch separates (one size the faster in enough "
                  f"of {rounds} rounds for the sign test's p <= 0.05), dtsim orders {agree} as torch does" +
              (f" and ties {ties}" if ties else "") + "."]
    return lines
