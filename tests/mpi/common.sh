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
