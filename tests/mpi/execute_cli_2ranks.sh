#!/usr/bin/env bash
# `mpirun -np 2 dtsim execute` as a user runs it: real training of an MLP
# under DDP with a measured trace, and replay of a transformer under FSDP.
#   Usage: execute_cli_2ranks.sh path/to/dtsim
source "$(dirname "$0")/common.sh"
dtsim="$1"
enter_scratch_dir
dir="$scratch"

within 120 mpirun -np 2 --oversubscribe "$dtsim" execute --model mlp-4x256 --micro-batch 16 --steps 6 \
  --trace measured.json > train.out
cat train.out
grep -q 'in train mode on 2 rank(s)' train.out
grep -q '"traceEvents"' measured.json
grep -q '"rank 1' measured.json   # one process per rank in the measured trace

# --fault-timeout 100: this checks the replay's output, not the watchdog (the
# faults test does); gpt2's optimizer step over its shard took over 30 s under
# AddressSanitizer on a machine whose two cores were also running fuzzers.
within 120 mpirun -np 2 --oversubscribe "$dtsim" execute --model gpt2 --seq-len 32 --strategy fsdp --steps 2 \
  --fault-timeout 100 --format json > replay.json
cat replay.json
grep -q '"mode": "replay"' replay.json
