#!/usr/bin/env bash
# dtsim gui --screenshot renders offscreen and exits: a simulated what-if, a
# trace file from simulate --trace, and a compare of the two, each a PNG of
# the asked size; wrong uses fail with a message.
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
