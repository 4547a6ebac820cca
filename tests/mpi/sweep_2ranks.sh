#!/usr/bin/env bash
# `mpirun -np 2 dtsim sweep` prints exactly what one process prints (CSV and
# JSON), and only rank 0 prints it.
#   sweep_2ranks.sh path/to/dtsim
source "$(dirname "$0")/common.sh"
dtsim=$1
enter_scratch_dir

args=(sweep --model gpt2-xl --nodes 2 --gpus-per-node 8 --hardware h100-sxm --precision bf16-mixed
      --axis strategy=ddp,fsdp,deepspeed --axis micro_batch=1,2,4,64 --axis activation_checkpointing=false,true
      --axis bucket_cap_mb=10,25,50 --axis sharding_strategy=FULL_SHARD,HYBRID_SHARD --axis stage=1,2,3
      --global-batch 128)

for format in csv json; do
    "$dtsim" "${args[@]}" --format "$format" > single.$format 2> /dev/null
    mpirun -np 2 --oversubscribe "$dtsim" "${args[@]}" --format "$format" > mpi.$format
    test -s single.$format
    if ! diff -u single.$format mpi.$format; then
        echo "FAIL: mpirun -np 2 dtsim sweep --format $format differs from one process" >&2
        exit 1
    fi
done
# Odd split: 3 ranks over a count that is not a multiple of 3.
mpirun -np 3 --oversubscribe "$dtsim" "${args[@]}" --format csv > mpi3.csv
diff -u single.csv mpi3.csv
echo "OK: $(($(wc -l < single.csv) - 1)) configurations identical on 1, 2 and 3 ranks"
