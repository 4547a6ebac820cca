#!/usr/bin/env bash
# dtsim gui --screenshot renders offscreen and exits: a simulated what-if, a
# trace file from simulate --trace, a compare of the two, a sweep run in the
# window and one read from `dtsim sweep --format json`, and the compare view
# `dtsim validate --gui-screenshot` leaves, each a PNG of the asked size;
# wrong uses fail with a message.
set -euo pipefail
dtsim="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
export QT_QPA_PLATFORM=offscreen

png_size() {  # width x height from the PNG header
  python3 -c 'import struct,sys; d=open(sys.argv[1],"rb").read(24); assert d[:8]==b"\x89PNG\r\n\x1a\n"; print("%dx%d" % struct.unpack(">II", d[16:24]))' "$1"
}

"$dtsim" simulate --model gpt2 --nodes 1 --gpus-per-node 8 --micro-batch 4 --trace "$dir/p.json" >/dev/null
"$dtsim" gui --model gpt2 --nodes 1 --gpus-per-node 8 --micro-batch 4 --view whatif \
  --what-if-change micro_batch=8 --screenshot "$dir/whatif.png" --size 1280x720
[ "$(png_size "$dir/whatif.png")" = 1280x720 ]
"$dtsim" gui "$dir/p.json" --screenshot "$dir/timeline.png" --size 1000x600
[ "$(png_size "$dir/timeline.png")" = 1000x600 ]
"$dtsim" gui "$dir/p.json" --model gpt2 --nodes 1 --gpus-per-node 8 --micro-batch 4 --view compare \
  --screenshot "$dir/compare.png"
[ "$(png_size "$dir/compare.png")" = 1600x900 ]

# --select: the first span whose name matches, selected with what it waits for; no match is an error.
"$dtsim" gui "$dir/p.json" --select "allreduce" --screenshot "$dir/select.png" --size 1000x600
[ "$(png_size "$dir/select.png")" = 1000x600 ]
if out=$("$dtsim" gui "$dir/p.json" --select "no such span" --screenshot "$dir/x.png" 2>&1); then
  echo "--select without a match should fail"; exit 1
fi
grep -q "no span's name contains it" <<<"$out"

# The sweep view: run here (--axis), or a sweep's JSON file with and without its base configuration.
"$dtsim" gui --model gpt2 --nodes 1 --gpus-per-node 8 --axis strategy=ddp,fsdp --axis micro_batch=1,4 \
  --screenshot "$dir/sweep.png" --size 1400x900
[ "$(png_size "$dir/sweep.png")" = 1400x900 ]
"$dtsim" sweep --model gpt2 --nodes 1 --gpus-per-node 8 --axis strategy=ddp,fsdp --axis micro_batch=1,4 \
  --format json > "$dir/sweep.json"
"$dtsim" gui "$dir/sweep.json" --view sweep --screenshot "$dir/sweep_file.png"
"$dtsim" gui "$dir/sweep.json" --model gpt2 --nodes 1 --gpus-per-node 8 --view sweep --screenshot "$dir/sweep_base.png"
[ "$(png_size "$dir/sweep_base.png")" = 1600x900 ]
"$dtsim" sweep --model gpt2 --nodes 1 --gpus-per-node 8 --micro-batch 4 --axis strategy=ddp,fsdp \
  --format json > "$dir/strategies.json"
if out=$("$dtsim" gui "$dir/strategies.json" --model gpt2 --nodes 1 --gpus-per-node 8 --micro-batch 3 \
    --screenshot "$dir/x.png" 2>&1); then
  echo "a sweep file over another base configuration should fail"; exit 1
fi
grep -q "strategies.json" <<<"$out" && grep -q -- "--micro-batch" <<<"$out"
if out=$("$dtsim" gui --axis micro_batch=1,2 --screenshot "$dir/x.png" 2>&1); then
  echo "--axis without --model should fail"; exit 1
fi
grep -q "give it with --model" <<<"$out"

# An advise --format json file opens in the sweep view on advise's pick.
"$dtsim" advise --model gpt2 --nodes 1 --gpus-per-node 8 --format json > "$dir/advise.json"
"$dtsim" gui "$dir/advise.json" --model gpt2 --nodes 1 --gpus-per-node 8 --view sweep --screenshot "$dir/advise.png"
[ "$(png_size "$dir/advise.png")" = 1600x900 ]

# validate --gui-screenshot: one rank, measured here, the compare view of each strategy.
"$dtsim" validate --model mlp-2x64 --micro-batch 8 --steps 2 --strategies ddp,fsdp \
  --gui-screenshot "$dir/validate.png" > "$dir/validate.out"
grep -q "Compare view written to" "$dir/validate.out"
[ "$(png_size "$dir/validate.png")" = 1600x900 ]
if out=$(env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM "$dtsim" validate --model mlp-2x64 --steps 2 --gui 2>&1); then
  echo "validate --gui without a display should fail"; exit 1
fi
grep -q "no display" <<<"$out"

# Mistakes say what to do.
if out=$("$dtsim" gui "$dir/p.json" --view compare --screenshot "$dir/x.png" 2>&1); then
  echo "a compare of one trace should fail"; exit 1
fi
grep -q "needs two traces" <<<"$out"
if out=$("$dtsim" gui --screenshot "$dir/x.png" 2>&1); then echo "nothing to show should fail"; exit 1; fi
grep -q "nothing to show" <<<"$out"
if out=$("$dtsim" gui "$dir/p.json" --size 12 --screenshot "$dir/x.png" 2>&1); then echo "bad size should fail"; exit 1; fi
grep -q "WIDTHxHEIGHT" <<<"$out"
echo "ok"
