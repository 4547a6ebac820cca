#!/usr/bin/env bash
# `mpirun -np 2 dtsim validate`: a quick calibration, then each strategy is
# priced from it refreshed for its plan, executed, and the errors are
# reported; a calibration that cannot be refreshed here is refused by
# --refresh on.   Usage: validate_2ranks.sh path/to/dtsim
source "$(dirname "$0")/common.sh"
dtsim="$1"
enter_scratch_dir
dir="$scratch"
within 150 mpirun -np 2 --oversubscribe "$dtsim" validate --model mlp-4x256 --micro-batch 16 --steps 3 \
  --strategies ddp,fsdp,deepspeed_stage_2 --tasks 3 --format json > validate.json
cat validate.json
python3 - validate.json <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["world_size"] == 2, j
assert j["refreshed"] is True, j  # a CPU calibration measured here is refreshed by default
assert j["transport"] == "mpi", j  # the quick calibration's own transport
assert [r["strategy"] for r in j["results"]] == ["ddp", "fsdp", "deepspeed_stage_2"], j
for r in j["results"]:
    assert r["measured_step_time_s"] > 0 and r["predicted_step_time_s"] > 0, r
    assert "compute" in r["by_task_kind"] and "collective" in r["by_task_kind"], r
    assert abs(r["error"]) < 10, r  # the same plan on both sides: not off by an order of magnitude
    # --tasks 3: the three tasks furthest from measured, furthest first, named as the trace names them.
    t = r["tasks"]
    assert len(t) == 3, r
    gaps = [abs(x["predicted_s"] - x["measured_s"]) for x in t]
    assert gaps == sorted(gaps, reverse=True), t
    assert all(x["name"] and x["kind"] in ("compute", "collective", "copy", "host_compute", "io") for x in t), t
PY

# A datasheet preset cannot be re-measured on this machine.
if within 60 mpirun -np 2 --oversubscribe "$dtsim" validate --model mlp-4x256 --micro-batch 16 --steps 2 \
  --hardware h100-sxm --refresh on > refused.out 2> refused.err; then
  echo "validate --refresh on with a preset should fail"; exit 1
fi
cat refused.err
grep -q -- "--refresh on: calibration 'h100-sxm' cannot be refreshed here" refused.err

# A gloo calibration is compared with gloo's collectives, as it priced them.
within 60 mpirun -np 2 --oversubscribe "$dtsim" calibrate --backend gloo --quick --out gloo.json
within 60 mpirun -np 2 --oversubscribe "$dtsim" validate --model mlp-4x256 --micro-batch 16 --steps 2 \
  --hardware gloo.json --refresh off > gloo.out
cat gloo.out
grep -q "executed over gloo" gloo.out
