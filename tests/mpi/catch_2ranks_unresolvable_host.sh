#!/usr/bin/env bash
# Runs the Catch2 cases of a tag on 2 MPI ranks on a host whose name does not
# resolve (a fresh Debian root has no /etc/hosts entry for it). gloo must fall
# back to the loopback as torch does; gloo's own lookup crashes on such a name.
# Usage: catch_2ranks_unresolvable_host.sh <test binary> <Catch2 test spec>
# The host name is changed in a private UTS namespace, which needs root;
# elsewhere the test is skipped (exit 77) and says why.
source "$(dirname "$0")/common.sh"
if [[ $# -ne 2 ]]; then
    echo "usage: $0 <test binary> <test spec>" >&2
    exit 2
fi
if ! unshare --uts true 2>/dev/null; then
    echo "SKIPPED: cannot make a private UTS namespace here (unshare --uts needs root), so the host name cannot be changed"
    exit 77
fi
exec unshare --uts bash -c '
    set -euo pipefail
    hostname dtsim-unresolvable.invalid
    if getent hosts "$(hostname)" >/dev/null; then echo "the test host name resolves after all"; exit 1; fi
    echo "host name: $(hostname) (does not resolve)"
    exec mpirun -np 2 --oversubscribe "$1" --warn NoTests "$2"
' bash "$1" "$2"
