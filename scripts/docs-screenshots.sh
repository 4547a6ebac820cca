#!/usr/bin/env bash
# Re-takes the GUI screenshots the README shows (docs/gui-*.png) under
# xvfb-run, from a built dtsim. The compare view is a real 2-rank validate on
# this machine, so run it with nothing else busy (pgrep -c cc1plus = 0).
#   scripts/docs-screenshots.sh [path/to/dtsim]     (default: build/ci/cli/dtsim)
# Look at every picture before committing it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dtsim="$(realpath "${1:-$root/build/ci/cli/dtsim}")"
docs="$root/docs"
command -v xvfb-run >/dev/null || { echo "xvfb-run is needed (apt-get install xvfb)" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
gui() { xvfb-run -a "$dtsim" gui "$@" 2> >(grep -v XDG_RUNTIME_DIR >&2); }
xl=(--model gpt2-xl --nodes 2 --micro-batch 4 --precision bf16-mixed)

"$dtsim" simulate "${xl[@]}" --trace ddp.json > /dev/null
gui ddp.json --screenshot "$docs/gui-timeline.png" --size 1600x900
gui ddp.json --select "allreduce bucket 40" --window 122:134 --screenshot "$docs/gui-timeline-zoom.png" --size 1600x900
gui "${xl[@]}" --view whatif --what-if-change micro_batch=16 --screenshot "$docs/gui-whatif.png" --size 1600x900
gui "${xl[@]}" --axis strategy=ddp,fsdp,deepspeed_stage_2,deepspeed_stage_3 --axis micro_batch=1,2,4,8,16 \
  --screenshot "$docs/gui-sweep.png" --size 1600x1000
xvfb-run -a mpirun -np 2 "$dtsim" validate --model mlp-4x512 --micro-batch 32 --steps 4 --strategies ddp,fsdp \
  --gui-screenshot "$docs/gui-compare.png"
ls -l "$docs"/gui-*.png
