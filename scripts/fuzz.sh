#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/*_fuzz.cpp, clang, build/fuzz) and runs
# each for SECONDS (default 60), one after another. Prints per target the
# executions, executions per second, coverage gained over the seed corpus
# and crashes; exits non-zero if any target crashed. Crash inputs are kept in
# build/fuzz/crashes/<target>-crash-<sha1> (replay: build/fuzz/fuzz/<target>_fuzz FILE);
# the corpus each run grows is kept in build/fuzz/corpus/<target>. Seeds come
# from fuzz/corpus/<target>/ and a dictionary of field names and edge numbers
# from fuzz/dict/<target>.dict, where they exist.
#
#   scripts/fuzz.sh            # 60 s per target
#   scripts/fuzz.sh 1800       # the 30-minute runs
#   FUZZ_TARGETS="knobs calibration" scripts/fuzz.sh 300
#   FUZZ_PARALLEL=2 scripts/fuzz.sh 1800   # two targets at a time (one per core)
set -euo pipefail

seconds="${1:-60}"
for tool in clang++ /usr/bin/time; do
    command -v "$tool" >/dev/null ||
        { echo "scripts/fuzz.sh: $tool is missing: apt-get install clang libfuzzer-14-dev time" >&2; exit 2; }
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build/fuzz"

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTSIM_FUZZ=ON \
    -DDTSIM_ENABLE_CUDA=OFF -DBUILD_TESTING=OFF >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; exit 1; }

targets=()
if [[ -n "${FUZZ_TARGETS:-}" ]]; then
    read -r -a targets <<<"$FUZZ_TARGETS"
else
    for f in "$root"/fuzz/*_fuzz.cpp; do
        name="$(basename "$f" .cpp)"
        targets+=("${name%_fuzz}")
    done
fi

# Only the targets fuzz/CMakeLists.txt declares (a new file may not be wired yet).
# (The list is taken once: grep -q closing the pipe early would make ninja die
# of SIGPIPE, which pipefail would report as a missing target.)
declared=$(ninja -C "$build" -t targets all 2>/dev/null)
known=()
for t in "${targets[@]}"; do
    if grep -q "^fuzz/${t}_fuzz:" <<<"$declared"; then
        known+=("$t")
    else
        echo "fuzz/${t}_fuzz.cpp: no ${t}_fuzz target in fuzz/CMakeLists.txt; skipped" >&2
    fi
done
[[ ${#known[@]} -gt 0 ]] || { echo "no fuzz targets to run" >&2; exit 1; }
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target "${known[@]/%/_fuzz}"

mkdir -p "$build/crashes" "$build/logs"
failed=0
printf '%-18s %8s %12s %9s %16s %8s\n' target "CPU s" executions exec/s "new coverage" crashes
fuzz_one() {
    local t="$1" corpus seeds dict log before rc after execs rate cov0 cov1 crashes cpu
    corpus="$build/corpus/$t"
    mkdir -p "$corpus"
    seeds=()
    [[ -d "$root/fuzz/corpus/$t" ]] && seeds=("$root/fuzz/corpus/$t")
    dict=()
    [[ -f "$root/fuzz/dict/$t.dict" ]] && dict=("-dict=$root/fuzz/dict/$t.dict")
    log="$build/logs/$t.log"
    before=$(find "$build/crashes" -maxdepth 1 -name "$t-*" | wc -l)
    set +e
    /usr/bin/time -o "$build/logs/$t.cpu" -f '%U %S' \
    "$build/fuzz/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/crashes/$t-" "${dict[@]}" "$corpus" "${seeds[@]}" >"$log" 2>&1
    rc=$?
    set -e
    after=$(find "$build/crashes" -maxdepth 1 -name "$t-*" | wc -l)
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    cov0=$(grep -o 'INITED cov: [0-9]*' "$log" | grep -o '[0-9]*$' | head -1)
    cov1=$(grep -o 'cov: [0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    cpu=$(awk '{printf "%.0f", $1 + $2}' "$build/logs/$t.cpu" 2>/dev/null || echo '?')
    crashes=$((after - before))
    if [[ $rc -ne 0 && $crashes -eq 0 ]]; then crashes=1; fi  # died before writing an artifact
    printf '%-18s %8s %12s %9s %16s %8s\n' "$t" "$cpu" "${execs:-?}" "${rate:-?}" \
        "+$(( ${cov1:-0} - ${cov0:-0} )) (${cov0:-?}->${cov1:-?})" "$crashes"
    if [[ $crashes -ne 0 ]]; then
        touch "$build/logs/$t.failed"
        echo "  $t crashed; log $log; inputs:" >&2
        find "$build/crashes" -maxdepth 1 -name "$t-*" -print | sed 's/^/    /' >&2 || true
    fi
}

parallel="${FUZZ_PARALLEL:-1}"
rm -f "$build"/logs/*.failed
for t in "${known[@]}"; do
    if [[ $parallel -le 1 ]]; then
        fuzz_one "$t"
    else
        while [[ $(jobs -rp | wc -l) -ge $parallel ]]; do wait -n || true; done
        fuzz_one "$t" &
    fi
done
wait
ls "$build"/logs/*.failed >/dev/null 2>&1 && failed=1
exit $failed
