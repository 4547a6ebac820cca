#!/usr/bin/env bash
# A quick CPU calibration on two MPI ranks, then the simulator prices a
# configuration with it; a group size it did not measure gives an error that
# says what to measure.   Usage: calibrate_quick.sh path/to/dtsim
source "$(dirname "$0")/common.sh"
dtsim="$1"
enter_scratch_dir
dir="$scratch"

start=$(date +%s)
timeout 120 mpirun -np 2 --oversubscribe "$dtsim" calibrate --backend cpu --quick --io-dir "$dir" --out cal.json \
  > calibrate.out
elapsed=$(( $(date +%s) - start ))
echo "calibrate --quick on 2 ranks took ${elapsed} s"
cat calibrate.out
test -s cal.json
grep -q '"source": "measured"' cal.json
grep -q '"backend": "cpu-mpi-openblas"' cal.json
grep -q '"kind": "allreduce"' cal.json
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
