#!/usr/bin/env bash
# A quick CPU calibration on two MPI ranks, then the simulator prices a
# configuration with it; a group size it did not measure gives an error that
# says what to measure.   Usage: calibrate_quick.sh path/to/dtsim
source "$(dirname "$0")/common.sh"
dtsim="$1"
enter_scratch_dir
dir="$scratch"

start=$(date +%s)
within 120 mpirun -np 2 --oversubscribe "$dtsim" calibrate --backend cpu --quick --io-dir "$dir" --out cal.json \
  > calibrate.out
elapsed=$(( $(date +%s) - start ))
echo "calibrate --quick on 2 ranks took ${elapsed} s"
cat calibrate.out
test -s cal.json
grep -q '"source": "measured"' cal.json
grep -q '"backend": "cpu-mpi-openblas"' cal.json
grep -q '"kind": "allreduce"' cal.json
# The first-touch rate of fresh pages (torch's freed gradients come back from the OS) is measured.
grep -Eq '"first_touch_gbps": [0-9.e+]+' cal.json
# Two ranks share the node's memory: one rank alone is measured too, for runs with fewer ranks a node.
grep -Eq '"mem_bw_one_rank_gbps": [0-9.e+]+' cal.json
grep -Eq '"first_touch_one_rank_gbps": [0-9.e+]+' cal.json
# How far apart two ranks finish the same compute, at least 1, and over how many ranks.
grep -Eq '"straggler": (1|1\.[0-9e+-]*|[2-9][0-9.e+-]*),' cal.json
grep -q '"straggler_ranks": 2' cal.json
# nccl-tests' columns were printed for every collective.
grep -q 'busbw' calibrate.out

"$dtsim" simulate --model mlp-4x512 --micro-batch 8 --hardware cal.json --nodes 1 --gpus-per-node 2 \
  --format json > sim.json
grep -q '"hardware_source": "measured"' sim.json
grep -Eq '"step_time_s": [0-9.e-]+' sim.json

if "$dtsim" simulate --model mlp-4x512 --hardware cal.json --nodes 1 --gpus-per-node 4 2> err.txt; then
  echo "a group of 4 was simulated with a 2-rank calibration"; exit 1
fi
grep -q 'mpirun -np 4' err.txt

# The gloo backend measures gloo's TCP collectives (what torch.distributed runs
# on CPU) and says so in the calibration and in its tables.
within 180 mpirun -np 2 --oversubscribe "$dtsim" calibrate --backend gloo --quick --io-dir "$dir" --out gloo.json \
  > calibrate_gloo.out
cat calibrate_gloo.out
grep -q '"backend": "cpu-gloo-openblas"' gloo.json
grep -q 'gloo (TCP' gloo.json
grep -q '(dtsim, gloo fp32)' calibrate_gloo.out
grep -q '"kind": "reduce_scatter"' gloo.json
# fp16 allreduce has its own curve (the fp16 hook's call), measured in half.
grep -q '"dtype": "fp16"' gloo.json
grep -q '(dtsim, gloo fp16)' calibrate_gloo.out
"$dtsim" simulate --model mlp-4x512 --micro-batch 8 --hardware gloo.json --nodes 1 --gpus-per-node 2 \
  --format json > sim_gloo.json
grep -Eq '"step_time_s": [0-9.e-]+' sim_gloo.json

# A bad --base names --base, not --hardware.
if "$dtsim" calibrate --import-nccl-tests calibrate.out --base no-such-gpu --out x.json 2> base_err.txt; then
  echo "a bad --base was accepted"; exit 1
fi
cat base_err.txt
grep -q -- '--base no-such-gpu' base_err.txt
if grep -q -- '--hardware' base_err.txt; then echo "the --base error names --hardware"; exit 1; fi
echo "OK"
