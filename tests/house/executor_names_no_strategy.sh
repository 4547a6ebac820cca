#!/usr/bin/env bash
# Issue 12: the executor runs any Plan from what the Plan says (shard groups,
# collective roles, the hook, the compute stream), never by strategy or stream
# name. A branch on one of those names in executor/ fails this test.
set -u
root="$1"
hits=$(grep -rnE '"(ddp|fsdp|deepspeed|zero[123]?|compute|nccl)"|config\.strategy *[!=]=|strategies\(\)\.find' \
    "$root/executor" --include='*.cpp' --include='*.hpp' --include='*.cu')
if [ -n "$hits" ]; then
    echo "executor/ branches on a strategy or stream name; put what it needs in the Plan instead:"
    echo "$hits"
    exit 1
fi
count=$(find "$root/executor" -name '*.cpp' -o -name '*.hpp' | wc -l)
if [ "$count" -lt 10 ]; then
    echo "expected the executor's sources under $root/executor, found $count files"
    exit 1
fi
echo "executor/: $count source files, no strategy or stream name"
