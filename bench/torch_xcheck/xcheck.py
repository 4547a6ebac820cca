#!/usr/bin/env python3
"""Cross-check dtsim's plan (buckets, collectives) against what real torch did in tests/data/torch/.

Standard library only (python3); torch is not needed, the traces are already there.

    python3 bench/torch_xcheck/xcheck.py measure        # writes bench/torch_xcheck/measured.json from the traces
    python3 bench/torch_xcheck/xcheck.py compare --dtsim build/release/cli/dtsim
                                                        # runs `dtsim simulate --format json` for each MLP case
                                                        # and compares with measured.json

What is compared (structure only; the traces' timings are CPU/gloo timings on a
busy 2-core VM and are not what dtsim prices):
- DDP (ddp_mlp, ddp_mlp_bucket1mb, ddp_mlp_fp16hook): the gradient buckets, in the
  order torch reduced them after its bucket rebuild, as bytes (Input Dims x dtype
  of each gloo:all_reduce), against dtsim's "buckets" (bytes, fp32 gradients) and
  its "collectives" (allreduce: count per step and bytes; fp16_compress halves them).
- FSDP FULL_SHARD (fsdp1_mlp, fsdp2_mlp): all-gathers and reduce-scatters per step
  and their sizes, against dtsim's "collectives". Over gloo a reduce-scatter runs
  as an all-reduce of the whole unsharded buffer (c10d::_reduce_scatter_base_ ->
  gloo:all_reduce [2 x shard]); measured.json records both the reduce-scatter's
  own sizes (from the c10d enqueue) and what gloo moved.

dtsim's JSON fields used: "buckets": [{"index", "bytes", "params"}], "collectives":
[{"kind", "bytes", "group_size", "count"}] (sim/report.cpp). Whether a collective's
"bytes" is the full buffer or one rank's shard is printed, not assumed: the
compare step reports which convention matches.
"""
from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "tests", "data", "torch")
DTYPE_BYTES = {"float": 4, "c10::Half": 2, "c10::BFloat16": 2, "double": 8}

# case -> dtsim simulate arguments describing the same run (the MLP is dtsim's mlp-4x512).
SIM_ARGS = {
    "ddp_mlp": ["--strategy", "ddp"],
    "ddp_mlp_bucket1mb": ["--strategy", "ddp", "--set", "bucket_cap_mb=1"],
    "ddp_mlp_fp16hook": ["--strategy", "ddp", "--set", "comm_hook=fp16_compress"],
    # torch wrapped each Linear (262,656 parameters) as its own unit; dtsim's
    # size policy closing a unit at 200,000 parameters gives the same four units.
    "fsdp1_mlp": ["--strategy", "fsdp", "--set", "sharding_strategy=FULL_SHARD",
                  "--set", "auto_wrap_policy=size", "--set", "min_num_params=200000"],
    # torch's fully_shard on each Linear, then on the model: dtsim's fsdp2 with the same units.
    "fsdp2_mlp": ["--strategy", "fsdp2", "--set", "units=size", "--set", "min_num_params=200000"],
}
COMMON = ["--model", "mlp-4x512", "--nodes", "1", "--gpus-per-node", "2", "--micro-batch", "32",
          "--precision", "fp32", "--optimizer", "sgd", "--format", "json"]


def load(path: str) -> dict:
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        return json.load(f)


def numel(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def measure_rank(path: str) -> dict:
    evs = load(path)["traceEvents"]
    steps = sorted(((int(re.match(r"ProfilerStep#(\d+)", e["name"]).group(1)), float(e["ts"]), float(e["dur"]))
                    for e in evs if e.get("cat") == "user_annotation" and e.get("ph") == "X"
                    and str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda s: s[1])
    gloo = sorted((e for e in evs if e.get("ph") == "X" and str(e.get("name", "")).startswith("gloo:")),
                  key=lambda e: float(e["ts"]))
    enq = sorted((e for e in evs if e.get("cat") == "cpu_op" and str(e.get("name", "")).startswith("c10d::")),
                 key=lambda e: float(e["ts"]))
    per_step: dict = collections.defaultdict(list)
    for i, g in enumerate(gloo):
        ts = float(g["ts"])
        step = next((n for n, s, d in steps if s <= ts <= s + d), None)
        dims = g["args"]["Input Dims"][0]
        dtype = g["args"]["Input type"][0]
        c = enq[i] if i < len(enq) else None
        entry = {"gloo_op": g["name"], "dtype": dtype, "elems": numel(dims),
                 "bytes": numel(dims) * DTYPE_BYTES[dtype], "enqueue": c["name"] if c else None}
        if c and c["name"] == "c10d::_reduce_scatter_base_":
            out_dims, in_dims = c["args"]["Input Dims"][0], c["args"]["Input Dims"][1]
            entry["reduce_scatter_output_elems"] = numel(out_dims)
            entry["reduce_scatter_input_elems"] = numel(in_dims)
        per_step[str(step)].append(entry)
    return {"steps": [str(n) for n, _, _ in steps], "collectives_by_step": dict(per_step)}


def measure() -> dict:
    out = {"source": "tests/data/torch/<case>/rank<N>.pt.trace.json[.gz], gloo:* ops paired in start order "
                     "with c10d::* enqueues; bytes = Input Dims x Input type", "cases": {}}
    for case in SIM_ARGS:
        files = sorted(glob.glob(os.path.join(DATA, case, "rank*.pt.trace.json*")))
        ranks = {re.search(r"rank(\d+)", os.path.basename(f)).group(1): measure_rank(f) for f in files}
        # Every step of every rank must show the same sequence of collectives (kind, size).
        shapes = {(r, s): [(c["gloo_op"], c["bytes"], c["enqueue"]) for c in cs]
                  for r, m in ranks.items() for s, cs in m["collectives_by_step"].items()}
        uniform = len({tuple(v) for v in shapes.values()}) == 1
        ref = ranks["0"]["collectives_by_step"][ranks["0"]["steps"][-1]]
        summary = collections.Counter()
        for c in ref:
            kind = {"c10d::_reduce_scatter_base_": "reduce_scatter", "c10d::_allgather_base_": "allgather",
                    "c10d::allgather_": "allgather", "c10d::allreduce_": "allreduce"}.get(c["enqueue"], c["gloo_op"])
            # Full buffer: an all-gather's input is one rank's shard; a reduce-scatter's input is the whole buffer.
            full = {"allgather": c["bytes"] * len(ranks),
                    "reduce_scatter": c.get("reduce_scatter_input_elems", 0) * DTYPE_BYTES[c["dtype"]]}.get(kind, c["bytes"])
            summary[(kind, full)] += 1
        out["cases"][case] = {
            "world_size": len(ranks),
            "same_collectives_every_step_and_rank": uniform,
            "per_step": ref,
            "per_step_summary": [{"kind": k, "bytes_full_buffer": b, "count": n} for (k, b), n in sorted(summary.items())],
            "ddp_bucket_bytes_in_reduce_order": [c["bytes"] for c in ref] if case.startswith("ddp") else None,
        }
    return out


def compare(dtsim: str, measured: dict) -> int:
    bad = 0
    for case, args in SIM_ARGS.items():
        m = measured["cases"][case]
        cmd = [dtsim, "simulate", *COMMON, *args]
        p = subprocess.run(cmd, capture_output=True, text=True)
        print(f"== {case}: {' '.join(cmd[1:])}")
        if p.returncode != 0:
            print(f"   dtsim failed ({p.returncode}): {p.stderr.strip()[-500:]}")
            bad += 1
            continue
        sim = json.loads(p.stdout)
        if case.startswith("ddp"):
            want = sorted(m["ddp_bucket_bytes_in_reduce_order"])
            fp16 = "fp16" in case
            got_buckets = sorted(b["bytes"] for b in sim.get("buckets", []))
            # dtsim's buckets hold fp32 gradients; the fp16 hook halves what the allreduce moves.
            want_buckets = [b * 2 for b in want] if fp16 else want
            ok = got_buckets == want_buckets
            print(f"   buckets bytes: torch {want_buckets}  dtsim {got_buckets}  {'OK' if ok else 'DIFFER'}")
            bad += not ok
        meas = {(s["kind"], s["bytes_full_buffer"]): s["count"] for s in m["per_step_summary"]}
        world = m["world_size"]
        agg: dict = collections.Counter()
        groups = {}
        for c in sim.get("collectives", []):  # entries of one kind and size are added up (count per step)
            agg[(c["kind"], c["bytes"])] += c["count"]
            groups[(c["kind"], c["bytes"])] = c.get("group_size")
        for (k, b), n in sorted(agg.items()):
            conv = None
            if meas.get((k, b)) == n:
                conv = "full buffer"
            elif meas.get((k, b * world)) == n:
                conv = "per-rank shard"
            print(f"   dtsim {k} bytes {b} count {n} group {groups[(k, b)]}: "
                  f"{'matches torch (' + conv + ')' if conv else 'no torch collective of that size and count'}")
            bad += conv is None
        print("   torch per step: " + ", ".join(f"{s['count']} x {s['kind']} {s['bytes_full_buffer']} B"
                                                 for s in m["per_step_summary"]))
    print(f"{'all matched' if not bad else str(bad) + ' mismatches'}")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("measure")
    c = sub.add_parser("compare")
    c.add_argument("--dtsim", default=os.path.join(ROOT, "build", "release", "cli", "dtsim"),
                   help="a built dtsim binary (this script never builds it)")
    args = ap.parse_args()
    path = os.path.join(HERE, "measured.json")
    if args.cmd == "measure":
        m = measure()
        with open(path, "w") as f:
            json.dump(m, f, indent=1)
            f.write("\n")
        print(f"wrote {path}")
        for case, v in m["cases"].items():
            print(f"  {case}: uniform={v['same_collectives_every_step_and_rank']} "
                  + ", ".join(f"{s['count']} x {s['kind']} {s['bytes_full_buffer']} B" for s in v["per_step_summary"]))
        return 0
    with open(path) as f:
        measured = json.load(f)
    if not os.access(args.dtsim, os.X_OK):
        print(f"no dtsim binary at {args.dtsim}: build it first (./dtsim builds build/release)", file=sys.stderr)
        return 2
    return compare(args.dtsim, measured)


if __name__ == "__main__":
    sys.exit(main())
