#!/usr/bin/env bash
# Creates the Python venv used only to generate and cross-check test data
# (tests/data/torch/: real torch.profiler traces and HTA reference figures).
# It is never a runtime dependency of dtsim: nothing in the build or the
# product imports it.
#
#   scripts/make-venv.sh            # create or check .venv (quick no-op when set up)
#   scripts/make-venv.sh --force    # recreate it from scratch
#
# Environment: DTSIM_VENV (default <repo>/.venv, git-ignored),
#              DTSIM_TORCH_SPEC (default torch==2.15.0),
#              DTSIM_HTA_SPEC (default holistictraceanalysis==0.5.0),
#              DTSIM_PANDAS_SPEC (default pandas<3),
#              DTSIM_LIGHTNING_SPEC (default lightning==2.6.6),
#              DTSIM_DEEPSPEED_SPEC (default deepspeed==0.19.8; installed with
#              DS_BUILD_OPS=0: pure Python, no CUDA ops compiled).
# lightning and deepspeed are the peers of tests/python/emitted_lightning.py.
#
# Why the full CUDA wheel: PyPI has only one Linux x86_64 torch wheel and it is
# the CUDA build (the CPU-only index is a different host, not reachable here).
# Installing it with --no-deps and only the pure-Python dependencies does not
# work: `import torch` fails with "libcufile.so.0: cannot open shared object
# file" because libtorch_python links libtorch_cuda, which needs the nvidia-*
# wheels. So we install the default wheel with its CUDA dependencies (about
# 5.8 GiB in the venv); it runs on the CPU (torch.cuda.is_available() is False)
# and the gloo backend is built in.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${DTSIM_VENV:-$here/.venv}"
torch_spec="${DTSIM_TORCH_SPEC:-torch==2.15.0}"
hta_spec="${DTSIM_HTA_SPEC:-holistictraceanalysis==0.5.0}"
# HTA 0.5.0 (May 2025) was written against pandas 2; with pandas 3 some of its
# calls fail differently (critical_path_analysis), so keep pandas 2 for the oracle.
pandas_spec="${DTSIM_PANDAS_SPEC:-pandas<3}"
lightning_spec="${DTSIM_LIGHTNING_SPEC:-lightning==2.6.6}"
deepspeed_spec="${DTSIM_DEEPSPEED_SPEC:-deepspeed==0.19.8}"
python="${PYTHON:-/usr/bin/python3}"
stamp="$venv/dtsim-venv.txt"   # what was asked for and what got installed

want="torch_spec=$torch_spec hta_spec=$hta_spec pandas_spec=$pandas_spec lightning_spec=$lightning_spec deepspeed_spec=$deepspeed_spec"

if [[ "${1:-}" == "--force" ]]; then
    echo "make-venv: --force: removing $venv"
    rm -rf "$venv"
fi

check() {
    "$venv/bin/python" - <<'EOF'
import importlib.metadata as md
import torch, torch.distributed as dist
from hta.trace_analysis import TraceAnalysis  # noqa: F401
import lightning, deepspeed  # noqa: F401,E401
assert dist.is_gloo_available(), "torch built without gloo"
print(f"torch {torch.__version__}, holistictraceanalysis {md.version('holistictraceanalysis')}, "
      f"pandas {md.version('pandas')}, numpy {md.version('numpy')}, lightning {md.version('lightning')}, "
      f"deepspeed {md.version('deepspeed')}, gloo available")
EOF
}

# Quick check (no import of torch, which takes seconds): the stamp matches and
# the packages' metadata are still there.
quick_check() {
    "$venv/bin/python" -c 'import importlib.metadata as md
for p in ("torch", "holistictraceanalysis", "pandas", "numpy", "lightning", "deepspeed"): md.version(p)' 2>/dev/null
}

if [[ -f "$stamp" ]] && head -n1 "$stamp" | grep -qxF "$want" && quick_check; then
    echo "make-venv: $venv is set up ($want); nothing to do"
    sed -n '2p' "$stamp" | sed 's/^/make-venv:   /'
    exit 0
fi

if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
    echo "make-venv: $python lacks venv/ensurepip; installing Debian's python3-venv"
    apt-get update -qq && apt-get install -y -qq python3-venv
fi

if [[ ! -x "$venv/bin/python" ]]; then
    echo "make-venv: creating $venv with $("$python" --version 2>&1) ($python -m venv)"
    "$python" -m venv "$venv"
fi

echo "make-venv: installing $torch_spec, $hta_spec, $pandas_spec, $lightning_spec and $deepspeed_spec from PyPI" \
    "(first time: ~3 GiB of wheels, a few minutes)"
# --no-cache-dir: the CUDA wheels are large and we never reinstall them.
DS_BUILD_OPS=0 "$venv/bin/pip" install --no-cache-dir --disable-pip-version-check "$torch_spec" "$hta_spec" \
    "$pandas_spec" "$lightning_spec" "$deepspeed_spec"

echo "make-venv: checking the install (import torch, hta, lightning, deepspeed)"

summary="$(check 2>/dev/null | tail -n1)"  # deepspeed prints an accelerator warning first
{
    echo "$want"
    echo "$summary"
    echo "# installed $(date -u +%Y-%m-%dT%H:%MZ) with $("$venv/bin/python" --version 2>&1) from $python"
    "$venv/bin/pip" freeze --disable-pip-version-check
} > "$stamp"
echo "make-venv: recorded versions in $stamp:"
echo "make-venv:   $summary"
echo "make-venv: done; use $venv/bin/python"
