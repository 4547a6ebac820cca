#!/usr/bin/env bash
# The simulator is deterministic: the same input gives byte-identical output
# run after run, for simulate (text, JSON and the Chrome trace), sweep and
# advise. (Across -np 1/2/3 sweeps: tests/mpi/sweep_2ranks.sh.)
#   determinism.sh path/to/dtsim
set -euo pipefail
dtsim=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"

run_twice() {  # run_twice NAME ARGS...: runs dtsim twice, outputs must be identical
    local name=$1
    shift
    for i in 1 2; do
        "$dtsim" "$@" > "$name.$i.out"
        [ -f trace.json ] && mv trace.json "$name.$i.trace.json"
    done
    test -s "$name.1.out" || { echo "FAIL: $name printed nothing" >&2; exit 1; }
    cmp "$name.1.out" "$name.2.out" || { echo "FAIL: $name output differs between two runs" >&2; exit 1; }
    if [ -f "$name.1.trace.json" ]; then
        cmp "$name.1.trace.json" "$name.2.trace.json" || { echo "FAIL: $name trace differs" >&2; exit 1; }
    fi
    echo "identical: $name ($(wc -c < "$name.1.out") bytes)"
}

run_twice simulate-text simulate --model gpt2-xl --nodes 2 --gpus-per-node 8 --strategy ddp --micro-batch 4 \
    --precision bf16-mixed --trace trace.json
run_twice simulate-json simulate --model llama2-7b --nodes 2 --strategy fsdp --micro-batch 2 \
    --precision bf16-mixed --set sharding_strategy=HYBRID_SHARD --format json
run_twice simulate-fsdp2 simulate --model llama2-7b --nodes 2 --strategy fsdp2 --micro-batch 2 \
    --precision bf16-mixed --set hsdp=true --set reduce_dtype=fp32 --trace trace.json --format json
run_twice simulate-zero3-offload simulate --model llama2-7b --nodes 2 --micro-batch 1 --precision bf16-mixed \
    --strategy deepspeed_stage_3_offload --format json
run_twice sweep sweep --model gpt2-xl --nodes 2 --axis strategy=ddp,fsdp,deepspeed_stage_2 \
    --axis micro_batch=2,4,8 --axis bucket_cap_mb=25,100 --format csv
run_twice advise advise --model gpt2-xl --nodes 2 --precision bf16-mixed --global-batch 256
echo "OK"
