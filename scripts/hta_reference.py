#!/usr/bin/env python3
"""Run HTA (holistictraceanalysis) on each case of tests/data/torch/ and write <case>/hta_reference.json.

These are oracle figures for dtsim's C++ trace-reader tests. Run with the venv
of scripts/make-venv.sh:

    .venv/bin/python scripts/hta_reference.py [CASE_DIR ...]   # default: every case under tests/data/torch/

HTA is run on a temporary copy of the case's rank*.pt.trace.json[.gz] files
(HTA takes every .json/.json.gz in a directory as a trace, so it must not see
hta_reference.json). Each figure is computed twice, in separate processes:
with HTA's defaults (it rounds every event to whole microseconds: ts = ceil(ts),
end = floor(ts + dur), dur = end - ts; see hta/common/trace_parser.py
round_down_time_stamps) and with HTA_DISABLE_NS_ROUNDING=1 (the same code on the
unrounded times). The schema is described in tests/data/torch/README.md.
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback

SCHEMA = "dtsim-hta-reference/1"
BIG = 10 ** 6  # num_kernels: never fold annotations into "others"

SRC_LOAD = "TraceAnalysis(trace_dir=DIR, include_last_profiler_step=True)"
SRC_STEPS = f"{SRC_LOAD}.get_profiler_steps()"
SRC_UA = (f"{SRC_LOAD}.get_gpu_user_annotation_breakdown(use_gpu_annotation=False, visualize=False, "
          f"duration_ratio=1.0, num_kernels={BIG}) -> columns name, sum (us), max (us), min (us), mean (us), stddev, rank")
SRC_UA_COUNT = (f"{SRC_LOAD}.t.get_trace(rank): rows with cat == symbol 'user_annotation', grouped by name, count "
                "(the same rows the breakdown aggregates; the breakdown itself has no count column)")
SRC_STEP_ROWS = (f"{SRC_LOAD}.t.get_trace(rank): the ProfilerStep#N rows, ts and dur (ts after HTA aligns ranks: "
                 "minus the smallest ts over all ranks)")
SRC_OPS = ("LabeledTrace(trace_dir=DIR).get_ops_summary(LabeledTrace(trace_dir=DIR).extract_ops(rank=R, "
           "iteration=<every ProfilerStep#N>, device_type=DeviceType.CPU)) -> columns cat, name, counts, total_duration "
           "(hta.trace_diff; parse_traces() only, so no last-step filter; an event counts when HTA assigns it to a "
           "ProfilerStep by its start time, on any CPU thread)")


def rank_files(case_dir: str) -> list[str]:
    return sorted(p for p in glob.glob(os.path.join(case_dir, "rank*.pt.trace.json*"))
                  if re.search(r"rank\d+\.pt\.trace\.json(\.gz)?$", p))


def num(x):
    """JSON-friendly number: ints stay ints, floats that are whole become ints."""
    try:
        import numpy as np
        if isinstance(x, np.generic):
            x = x.item()
    except ImportError:
        pass
    if isinstance(x, float) and x.is_integer():
        return int(x)
    return x


def compute(trace_dir: str) -> dict:
    """Every figure, in this process's rounding mode."""
    import logging
    from hta.configs.config import logger as hta_logger
    hta_logger.setLevel(logging.ERROR)
    from hta.trace_analysis import TraceAnalysis
    from hta.trace_diff import DeviceType, LabeledTrace

    out: dict = {"ranks": {}, "other_calls": {}}
    ta = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)
    out["profiler_steps"] = [int(s) for s in ta.get_profiler_steps()]

    ua = ta.get_gpu_user_annotation_breakdown(use_gpu_annotation=False, visualize=False,
                                              duration_ratio=1.0, num_kernels=BIG)
    sym = ta.t.symbol_table
    ua_idx = sym.sym_index.get("user_annotation")
    for rank in ta.t.get_ranks():
        df = ta.t.get_trace(rank)
        r: dict = {}
        rows = df[df["cat"].eq(ua_idx)] if ua_idx is not None else df.iloc[0:0]
        names = rows["name"].map(lambda i: sym.sym_table[i])
        counts = names.value_counts().to_dict()
        by_name = {}
        if ua is not None:
            for _, row in ua[ua["rank"] == rank].iterrows():
                by_name[row["name"]] = {
                    "count": int(counts.get(row["name"], 0)),
                    "sum_us": num(row["sum (us)"]), "min_us": num(row["min (us)"]),
                    "max_us": num(row["max (us)"]), "mean_us": num(row["mean (us)"]),
                    "stddev_us": num(row["stddev"]),
                }
        r["user_annotations"] = dict(sorted(by_name.items()))
        steps = {}
        for _, row in rows[names.str.match(r"^ProfilerStep#\d+")].iterrows():
            n = int(re.match(r"^ProfilerStep#(\d+)", sym.sym_table[row["name"]]).group(1))
            steps[str(n)] = {"ts_us": num(row["ts"]), "dur_us": num(row["dur"])}
        r["steps"] = dict(sorted(steps.items(), key=lambda kv: int(kv[0])))
        out["ranks"][str(rank)] = r

    lt = LabeledTrace(label="case", trace_dir=trace_dir)
    iters = lt.iterations()
    for rank in lt.ranks():
        ops = lt.extract_ops(rank=rank, iteration=iters, device_type=DeviceType.CPU)
        summ = lt.get_ops_summary(ops)
        out["ranks"][str(rank)]["ops_summary"] = sorted(
            ({"cat": row["cat"], "name": row["name"], "count": int(row["counts"]),
              "total_dur_us": num(row["total_duration"])} for _, row in summ.iterrows()),
            key=lambda o: (o["cat"], o["name"]))
        out["ranks"][str(rank)]["ops_summary_iterations"] = [int(i) for i in iters]

    # The GPU-oriented calls, to record what they do on CPU-only traces.
    def attempt(label, fn):
        try:
            res = fn()
            if res is None:
                text = "returned None"
            elif hasattr(res, "to_dict"):
                text = "returned " + json.dumps(res.to_dict(orient="records") if hasattr(res, "columns")
                                                else res.to_dict(), default=str)[:4000]
            else:
                text = "returned " + repr(res)[:4000]
        except Exception as e:  # noqa: BLE001 - we record whatever HTA raises
            text = f"raised {type(e).__name__}: {str(e)[:300]}"
        out["other_calls"][label] = text

    first = ta.t.get_ranks()[0]
    attempt("get_temporal_breakdown(visualize=False)", lambda: ta.get_temporal_breakdown(visualize=False))
    attempt("get_comm_comp_overlap(visualize=False)", lambda: ta.get_comm_comp_overlap(visualize=False))
    attempt("get_gpu_kernel_breakdown(visualize=False)", lambda: ta.get_gpu_kernel_breakdown(visualize=False))
    attempt(f"get_idle_time_breakdown(ranks=[{first}], visualize=False)",
            lambda: ta.get_idle_time_breakdown(ranks=[first], visualize=False))
    attempt("get_potential_stragglers()", lambda: ta.get_potential_stragglers())
    attempt(f"critical_path_analysis(rank={first}, annotation='ProfilerStep', instance_id=0)",
            lambda: ta.critical_path_analysis(rank=first, annotation="ProfilerStep", instance_id=0))
    return out


def worker_main(trace_dir: str, out_path: str) -> int:
    res = compute(trace_dir)
    with open(out_path, "w") as f:
        json.dump(res, f)
    return 0


def run_mode(trace_dir: str, unrounded: bool) -> dict:
    env = dict(os.environ)
    env.pop("HTA_DISABLE_NS_ROUNDING", None)
    if unrounded:
        env["HTA_DISABLE_NS_ROUNDING"] = "1"
    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", trace_dir, out],
                           env=env, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"HTA worker failed ({'unrounded' if unrounded else 'default'}):\n{p.stderr[-3000:]}")
        with open(out) as f:
            return json.load(f)
    finally:
        os.remove(out)


def merge(rounded: dict, raw: dict) -> dict:
    """Default-mode figures, each with its unrounded twin alongside."""
    ranks = {}
    for rank, r in rounded["ranks"].items():
        q = raw["ranks"][rank]
        ua = {}
        for name, v in r["user_annotations"].items():
            u = q["user_annotations"].get(name, {})
            ua[name] = {**v, **{f"{k}_unrounded": u.get(k) for k in ("sum_us", "min_us", "max_us", "mean_us")}}
        steps = {n: {**v, "ts_us_unrounded": q["steps"].get(n, {}).get("ts_us"),
                     "dur_us_unrounded": q["steps"].get(n, {}).get("dur_us")} for n, v in r["steps"].items()}
        raw_ops = {(o["cat"], o["name"]): o for o in q["ops_summary"]}
        ops = []
        for o in r["ops_summary"]:
            u = raw_ops.get((o["cat"], o["name"]), {})
            ops.append({**o, "count_unrounded": u.get("count"), "total_dur_us_unrounded": u.get("total_dur_us")})
        ranks[rank] = {
            "steps": {"source": SRC_STEP_ROWS, "by_step": steps},
            "user_annotations": {"source": SRC_UA, "count_source": SRC_UA_COUNT, "by_name": ua},
            "ops_summary": {"source": SRC_OPS, "iterations": r["ops_summary_iterations"], "ops": ops},
        }
    return {"profiler_steps": {"source": SRC_STEPS, "value": rounded["profiler_steps"],
                               "value_unrounded": raw["profiler_steps"]},
            "ranks": ranks,
            "other_calls": {"source": f"{SRC_LOAD}.<call>, default rounding; the outcome as text",
                            "outcomes": rounded["other_calls"]}}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1], argv[2])
    import importlib.metadata as md
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs = argv or sorted(d for d in glob.glob(os.path.join(here, "tests", "data", "torch", "*"))
                          if os.path.isdir(d) and rank_files(d))
    versions = {p: md.version(p) for p in ("holistictraceanalysis", "pandas", "numpy")}
    for case_dir in dirs:
        files = rank_files(case_dir)
        with tempfile.TemporaryDirectory(prefix="hta-") as tmp:
            for f in files:
                shutil.copy(f, tmp)
            rounded = run_mode(tmp, unrounded=False)
            raw = run_mode(tmp, unrounded=True)
        doc = {
            "schema": SCHEMA,
            "case": os.path.basename(os.path.normpath(case_dir)),
            "generated_by": "scripts/hta_reference.py",
            "versions": versions,
            "trace_files": [os.path.basename(f) for f in files],
            "units": "microseconds. Plain fields are HTA's defaults, which round every event to whole us "
                     "(ts = ceil(ts), end = floor(ts + dur), dur = end - ts); *_unrounded fields are the same "
                     "HTA call with HTA_DISABLE_NS_ROUNDING=1",
            "include_last_profiler_step": True,
            "DIR": "a temporary directory holding copies of trace_files",
            **merge(rounded, raw),
        }
        out = os.path.join(case_dir, "hta_reference.json")
        with open(out, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=False)
            f.write("\n")
        print(f"wrote {out} ({os.path.getsize(out)} bytes)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
