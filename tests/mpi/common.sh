# Sourced by the MPI test scripts: strict mode, Open MPI allowed to run as root
# (as here and in CI), and enter_scratch_dir for scripts that write files.
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# A fresh directory, removed when the script exits; the script continues in it.
enter_scratch_dir() {
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    cd "$scratch"
}

# within SECONDS CMD...: CMD under `timeout`, so that a hang fails with the
# command named. SECONDS is the budget of a Release build; the sanitizer test
# presets set DTSIM_TEST_TIME_SCALE (instrumented code runs several times
# slower, and ASan once ran validate past its Release budget on a slow machine).
within() {
    local secs=$(( $1 * ${DTSIM_TEST_TIME_SCALE:-1} ))
    shift
    local rc=0
    timeout "$secs" "$@" || rc=$?
    [ $rc -ne 124 ] || echo "$(basename "$0"): timed out after $secs s: $*" >&2
    return $rc
}
