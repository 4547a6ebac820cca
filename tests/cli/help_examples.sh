#!/usr/bin/env bash
# Runs every example that `dtsim <command> --help` prints, as written, in a
# scratch directory holding the files the examples name (real traces and
# nccl-tests output from tests/data, copied to those names; the traces and
# calibrations the earlier examples write). Only the program's path is
# replaced. A GUI example without --screenshot opens its window offscreen
# and counts as run when it is still open after a few seconds. Skipped, each
# with the reason: examples that need a GPU.
#
#   tests/cli/help_examples.sh path/to/dtsim
set -uo pipefail
dtsim="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 QT_QPA_PLATFORM=offscreen

# The files the examples name.
cp -r "$src/tests/data/torch/ddp_mlp" traces
cp "$src/tests/data/torch/ddp_transformer/rank0.pt.trace.json.gz" rank0.pt.trace.json.gz
cp "$src/tests/data/torch/ddp_transformer/rank1.pt.trace.json.gz" rank1.pt.trace.json.gz
cp "$src/tests/data/torch/transformer_1rank/rank0.pt.trace.json.gz" profile.pt.trace.json.gz
cp "$src/tests/data/nccl_tests/all_reduce_perf_8rank.txt" all_reduce_perf.txt
cp "$src/tests/data/nccl_tests/all_reduce_perf_8rank.txt" ar_half.txt
cp "$src/tests/data/nccl_log/h100_2nodes.log" nccl_debug.log
"$dtsim" simulate --model mlp-4x512 --micro-batch 32 --gpus-per-node 2 --trace predicted.json >/dev/null || exit 1
"$dtsim" sweep --model gpt2 --nodes 2 --axis strategy=ddp,fsdp --format json >sweep.json || exit 1

# Each command's examples: the indented lines after "Example(s):", with
# continuations joined and trailing comments dropped.
examples_of() {
    "$dtsim" "$1" --help | awk '
        /^Examples?:/ { on = 1; next }
        on && !/^  / { on = 0 }
        on { sub(/^  +/, ""); line = line $0; if (line ~ /\\$/) { sub(/\\$/, " ", line); next } print line; line = "" }' |
        sed 's/ \{2,\}#.*$//; s/[[:space:]]*$//'
}

failed=0 ran=0 skipped=0
seen=""
# Calibrations first: later examples read the files they write.
for cmd in calibrate simulate demo models hardware advise sweep scale execute validate import gui; do
    while IFS= read -r ex; do
        [[ -z "$ex" ]] && continue
        case "$seen" in *"|$ex|"*) continue ;; esac  # the same example under several commands
        seen="$seen|$ex|"
        if [[ "$ex" == *"--backend cuda"* ]] && ! nvidia-smi -L >/dev/null 2>&1; then
            echo "SKIP ($cmd): needs a GPU: $ex"
            skipped=$((skipped + 1))
            continue
        fi
        run="$(sed -E "s#(^|[[:space:]])(\./)?dtsim([[:space:]])#\1$dtsim\3#" <<<"$ex")"
        opens_window=0
        if [[ "$ex" =~ (^|[[:space:]])(\./)?dtsim[[:space:]]+gui || "$ex" == *"--gui"* ]] && [[ "$ex" != *--screenshot* ]]; then
            opens_window=1
        fi
        start=$SECONDS
        if ((opens_window)); then
            timeout 8 bash -c "$run" </dev/null >out.txt 2>&1
            rc=$?
            [[ $rc -eq 124 ]] && rc=0  # still open: it ran
        else
            timeout 300 bash -c "$run" </dev/null >out.txt 2>&1
            rc=$?
        fi
        ran=$((ran + 1))
        if [[ $rc -ne 0 ]]; then
            failed=$((failed + 1))
            echo "FAILED ($cmd, exit $rc): $ex"
            tail -5 out.txt | sed 's/^/    /'
        else
            echo "ok ($cmd, $((SECONDS - start)) s): $ex"
        fi
    done < <(examples_of "$cmd")
done
echo "$ran examples run, $failed failed, $skipped skipped"
[[ $failed -eq 0 && $ran -gt 20 ]]
