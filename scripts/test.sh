#!/usr/bin/env bash
# The test command: installs what is missing, builds everything with warnings
# as errors, and runs every test through ctest. CI runs exactly this.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

scripts/install-deps.sh
cmake --preset ci
cmake --build --preset ci -j2
ctest --preset ci
