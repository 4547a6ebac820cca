#!/usr/bin/env bash
# Runs the test suite under the sanitizers (CI runs both after the suite):
#   asan: AddressSanitizer + UndefinedBehaviorSanitizer, the whole suite, MPI
#         tests included; leak detection on, with third-party leaks suppressed
#         by tests/sanitizers/lsan.supp (each entry says why).
#   tsan: ThreadSanitizer over the executor's stream threads, the peer wait and
#         the communicators' 2-rank tests (gloo's worker threads) (the tsan
#         test preset's filter), built for just those tests.
# Any sanitizer report fails the test it occurs in (halt_on_error).
#
#   scripts/sanitizers.sh          # asan then tsan
#   scripts/sanitizers.sh tsan
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

which=("$@")
[[ ${#which[@]} -gt 0 ]] || which=(asan tsan)
for s in "${which[@]}"; do
    case "$s" in
    asan)
        echo "== asan: address + undefined-behaviour sanitizers, the whole suite =="
        cmake --preset asan >/dev/null
        cmake --build --preset asan -j2
        ctest --preset asan
        ;;
    tsan)
        echo "== tsan: thread sanitizer, the executor's stream threads, the peer wait and the communicators =="
        cmake --preset tsan >/dev/null
        cmake --build --preset tsan -j2 --target dtsim_test_executor dtsim_test_profiler
        ctest --preset tsan
        ;;
    *)
        echo "scripts/sanitizers.sh: unknown sanitizer '$s': expected asan or tsan" >&2
        exit 2
        ;;
    esac
done
