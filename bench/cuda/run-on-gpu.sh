#!/usr/bin/env bash
# The CUDA backend's checks on a GPU machine, from a bundle made by
# scripts/gpu-bundle.sh (the machine needs the CUDA 13 runtime, cuBLAS, CUPTI
# and NCCL somewhere on disk, a driver, and nothing else of ours).
#
#   bench/cuda/run-on-gpu.sh BUNDLE_DIR OUT_DIR
#
# Runs, each under its own time limit, and writes into OUT_DIR:
#   1. the CUDA test cases of dtsim_test_profiler and dtsim_test_executor;
#   2. dtsim calibrate --backend cuda           -> calibration.json
#   3. dtsim execute --backend cuda for gpt2, gpt2-xl and llama2-7b, bf16-mixed,
#      DDP on one GPU, with that calibration   -> execute-*.json, trace-llama2-7b.json
#   4. bench/cuda/torch_llama_layers.py: real PyTorch Llama-2 blocks, where the
#      machine's python3 has torch             -> torch_llama_layers.json, a Kineto trace
#      (DTSIM_GPU_SKIP_TORCH=1 skips it; bench/cuda/torch_adam_step.py runs on its own)
# bench/cuda/README.md says how the figures were turned into bench/results/cuda.md.
set -uo pipefail
bundle=$(cd "${1:?bundle dir}" && pwd)
out=${2:?out dir}
mkdir -p "$out"
log() { echo "== $(date +%T) $*"; }

log "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader || true
. /etc/os-release 2>/dev/null && echo "os: $PRETTY_NAME"
ldd --version | head -1

# Debian's runtime libraries; those the machine already has are kept.
log "unpacking the bundle"
tar -C / --skip-old-files -xzf "$bundle/debroot.tar.gz" || exit 1
cuda_dirs=""
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcupti.so.13 libnccl.so.2; do
    f=$(find /usr/local/cuda/ /usr/local/cuda/extras/ /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
    [[ -n $f ]] || { echo "run-on-gpu.sh: $lib not found on this machine" >&2; exit 1; }
    cuda_dirs="$cuda_dirs:$(dirname "$f")"
    echo "$lib: $f"
done
export LD_LIBRARY_PATH="/usr/lib/x86_64-linux-gnu/openblas-pthread:/usr/lib/x86_64-linux-gnu/openmpi/lib${cuda_dirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_MCA_plm=isolated
mpirun=/usr/bin/mpirun.openmpi
[[ -x $mpirun ]] || mpirun=/usr/bin/orterun
if ldd "$bundle/dtsim" | grep 'not found'; then echo "run-on-gpu.sh: libraries missing" >&2; exit 1; fi
dtsim=("$mpirun" -np 1 --bind-to none "$bundle/dtsim")

log "tests: CUDA cases"
timeout 60 "$mpirun" -np 1 --bind-to none "$bundle/dtsim_test_profiler" "[cuda]" --success --reporter compact 2>&1 \
    | grep -v '^.*passed:' | tail -25
timeout 60 "$mpirun" -np 1 --bind-to none "$bundle/dtsim_test_executor" "[cuda]" 2>&1 | tail -25

log "calibrate --backend cuda"
if ! timeout 200 "${dtsim[@]}" calibrate --backend cuda --model llama2-7b --seq-len 4096 --micro-batch 2 --base h100-sxm --name "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-')-cuda-1rank" \
        --out "$out/calibration.json" 2>&1 | tr '\r' '\n' | grep -v '%' | tail -30; then
    log "full calibration failed or ran out of time; trying --quick"
    timeout 60 "${dtsim[@]}" calibrate --backend cuda --quick --base h100-sxm --out "$out/calibration.json" 2>&1 | tr '\r' '\n' | tail -20
fi
hw="$out/calibration.json"
[[ -s $hw ]] || hw=h100-sxm

for spec in "gpt2 8 1024" "gpt2-xl 4 1024" "llama2-7b 2 4096"; do
    set -- $spec
    log "execute --backend cuda $1 micro-batch $2 seq $3"
    trace=()
    [[ $1 == llama2-7b ]] && trace=(--trace "$out/trace-$1.json")
    timeout 100 "${dtsim[@]}" execute --backend cuda --model "$1" --micro-batch "$2" --seq-len "$3" --precision bf16-mixed \
        --steps 6 --hardware "$hw" --format json "${trace[@]}" >"$out/execute-$1.json" 2>/tmp/execute.err
    echo "rc $?"; tail -5 /tmp/execute.err
    grep -A8 '"step_time_s"' "$out/execute-$1.json"
done

if [[ -n ${DTSIM_GPU_SKIP_TORCH:-} ]]; then
    log "DTSIM_GPU_SKIP_TORCH is set: the PyTorch reference is skipped"
elif python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    log "PyTorch Llama-2 blocks"
    here=$(dirname "$0")
    PYTHONUNBUFFERED=1 timeout 240 python3 "$here/torch_llama_layers.py" --out "$out" --profile 2>&1 | grep -v Warning | tail -12
    gzip -f "$out"/*.pt.trace.json 2>/dev/null
else
    log "no python3 with CUDA torch here: the PyTorch reference is skipped"
fi
log "done"
