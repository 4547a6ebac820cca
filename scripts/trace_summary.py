#!/usr/bin/env python3
"""Plain-JSON summary of the torch.profiler traces in tests/data/torch/<case>/, one summary.txt per case.

Independent of HTA (and of torch): only json/gzip from the standard library, so
it runs with /usr/bin/python3. For each rank: the file, its event counts,
distributedInfo, the ProfilerStep#N slices with durations and the gaps between
them, and every gloo:* op (thread, step, ts, dur, Input Dims, Input type) with
the c10d::* enqueues on the main thread paired to them in start order.
All times are in microseconds as written in the trace (ts relative to the
trace's first event here, for readability).

    python3 scripts/trace_summary.py [DIR ...]    # default: every case under tests/data/torch/
"""
from __future__ import annotations

import collections
import glob
import gzip
import json
import os
import re
import sys

STEP_RE = re.compile(r"^ProfilerStep#(\d+)")


def load(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def rank_files(case_dir: str) -> list[tuple[int, str]]:
    out = []
    for p in glob.glob(os.path.join(case_dir, "rank*.pt.trace.json*")):
        m = re.search(r"rank(\d+)\.pt\.trace\.json(\.gz)?$", p)
        if m:
            out.append((int(m.group(1)), p))
    return sorted(out)


def fmt_dims(args: dict) -> str:
    return f"dims={json.dumps(args.get('Input Dims'))} type={json.dumps(args.get('Input type'))}"


def summarize_rank(rank: int, path: str) -> list[str]:
    doc = load(path)
    evs = doc["traceEvents"]
    L = [f"rank {rank}: {os.path.basename(path)} ({os.path.getsize(path)} bytes on disk)"]
    L.append(f"  traceEvents: {len(evs)}; by ph/cat: " + ", ".join(
        f"{ph}/{cat}={n}" for (ph, cat), n in sorted(collections.Counter(
            (e.get("ph"), e.get("cat", "-")) for e in evs).items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1])))))
    L.append(f"  distributedInfo: {json.dumps(doc['distributedInfo']) if 'distributedInfo' in doc else 'absent'}")
    ts_all = [float(e["ts"]) for e in evs if "ts" in e and e.get("ph") != "M"]
    t0 = min(ts_all)
    L.append(f"  baseTimeNanoseconds {doc.get('baseTimeNanoseconds')}; first non-M event ts {t0:.3f} (times below are relative to it)")
    L.append(f"  events sorted by ts: {ts_all == sorted(ts_all)}")

    threads: dict = collections.defaultdict(list)
    for e in evs:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e["pid"], e["tid"])].append(e["args"]["name"])
    L.append("  thread_name events: " + "; ".join(
        f"{pid}/{tid}: {' | '.join(names)}" for (pid, tid), names in sorted(threads.items(), key=lambda kv: str(kv[0]))))
    str_ids = sorted({f"pid={e.get('pid')!r} tid={e.get('tid')!r}" for e in evs
                      if isinstance(e.get("pid"), str) or isinstance(e.get("tid"), str)})
    L.append(f"  string pid/tid: {', '.join(str_ids) if str_ids else 'none'}")
    L.append(f"  [memory] instant events: {sum(1 for e in evs if e.get('name') == '[memory]')}")

    steps = sorted(((int(STEP_RE.match(e["name"]).group(1)), float(e["ts"]), float(e["dur"]), e)
                    for e in evs if e.get("cat") == "user_annotation" and e.get("ph") == "X"
                    and STEP_RE.match(str(e.get("name", "")))), key=lambda s: s[1])
    L.append(f"  steps ({len(steps)}; ts, dur, gap to the next step's start):")
    for i, (n, ts, dur, _) in enumerate(steps):
        gap = f"{steps[i + 1][1] - (ts + dur):.3f}" if i + 1 < len(steps) else "-"
        L.append(f"    ProfilerStep#{n}: ts {ts - t0:.3f} dur {dur:.3f} gap {gap}")
    if steps:
        L.append(f"    sum of step durations {sum(s[2] for s in steps):.3f}; mean {sum(s[2] for s in steps) / len(steps):.3f}")

    def step_of(ts: float) -> str:
        for n, sts, sdur, _ in steps:
            if sts <= ts <= sts + sdur:
                return f"#{n}"
        return "-"

    gloo = sorted((e for e in evs if str(e.get("name", "")).startswith("gloo:") and e.get("ph") == "X"),
                  key=lambda e: float(e["ts"]))
    enq = sorted((e for e in evs if e.get("cat") == "cpu_op" and str(e.get("name", "")).startswith("c10d::")),
                 key=lambda e: float(e["ts"]))
    L.append(f"  gloo ops ({len(gloo)}) and c10d enqueues ({len(enq)}), paired in start order:")
    for i, g in enumerate(gloo):
        c = enq[i] if i < len(enq) else None
        ctext = (f"  <- {c['name']} ts {float(c['ts']) - t0:.3f} dur {float(c['dur']):.3f} "
                 f"{fmt_dims(c.get('args', {}))}") if c else ""
        L.append(f"    {g['name']} tid {g['tid']} step {step_of(float(g['ts']))} ts {float(g['ts']) - t0:.3f} "
                 f"dur {float(g['dur']):.3f} {fmt_dims(g.get('args', {}))}{ctext}")
    for c in enq[len(gloo):]:
        L.append(f"    (unpaired) {c['name']} ts {float(c['ts']) - t0:.3f} dur {float(c['dur']):.3f} {fmt_dims(c.get('args', {}))}")
    tot = collections.defaultdict(lambda: [0, 0.0])
    for g in gloo:
        tot[g["name"]][0] += 1
        tot[g["name"]][1] += float(g["dur"])
    for name, (n, d) in sorted(tot.items()):
        L.append(f"    total {name}: count {n} dur {d:.3f}")
    return L


def summarize_case(case_dir: str) -> str:
    lines = [f"# {os.path.basename(os.path.normpath(case_dir))}: written by scripts/trace_summary.py "
             "from the plain JSON (independent of HTA); times in microseconds"]
    for rank, path in rank_files(case_dir):
        lines.append("")
        lines += summarize_rank(rank, path)
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs = argv or sorted(d for d in glob.glob(os.path.join(here, "tests", "data", "torch", "*"))
                          if os.path.isdir(d) and rank_files(d))
    for d in dirs:
        out = os.path.join(d, "summary.txt")
        with open(out, "w") as f:
            f.write(summarize_case(d))
        print(f"wrote {out} ({os.path.getsize(out)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
