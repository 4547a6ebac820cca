#!/bin/sh
# Runs a Python test script with the interpreter that has the test peers:
# the venv of scripts/make-venv.sh when it exists, else python3. Exits 77
# (ctest: skipped) with the reason when there is no python3 at all; the
# script itself exits 77 when a peer it needs (torch, ...) is missing.
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="${DTSIM_VENV:-$root/.venv}/bin/python"
if [ ! -x "$py" ]; then
    py="$(command -v python3)" || { echo "SKIP: no python3 on this machine (scripts/make-venv.sh makes the test venv)"; exit 77; }
fi
exec "$py" "$@"
