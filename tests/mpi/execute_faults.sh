#!/usr/bin/env bash
# Faults under `mpirun -np 2 dtsim execute`: a hung, stopped, killed (rank 1,
# or rank 0 itself) or failing rank, one that cannot allocate its buffers, and
# a full disk under the NVMe-offload files each stop the job quickly (well within 30 s), non-zero,
# with a message naming the rank and the cause; where the fault comes after
# completed steps, their trace is kept and is a valid trace. Uses the test
# hook DTSIM_FAULT_INJECT, a real ulimit and a real full tmpfs.
#   Usage: execute_faults.sh path/to/dtsim
source "$(dirname "$0")/common.sh"
set +e
dtsim="$1"
enter_scratch_dir
dir="$scratch"
fail() { echo "FAIL: $*"; exit 1; }
# A kept trace must parse as JSON with events (python3: installed by scripts/install-deps.sh).
valid_trace() {
  python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); assert len(t["traceEvents"]) > 0' "$1" ||
    fail "$1 is not a valid JSON trace"
}
run() {  # run NAME INJECTION: mpirun `within 60` s, sets rc and secs
  local name="$1"
  local start=$SECONDS
  DTSIM_FAULT_INJECT="$2" within 60 mpirun -np 2 --oversubscribe -x DTSIM_FAULT_INJECT "$dtsim" execute \
    --model mlp-4x128 --micro-batch 8 --steps 5 --fault-timeout "${FAULT_TIMEOUT:-5}" --trace "$name.json" \
    > "$name.out" 2> "$name.err"
  rc=$?
  secs=$((SECONDS - start))
  echo "== $name: exit status $rc after ${secs} s"
  cat "$name.out" "$name.err"
}

# A hang of rank 1 at step 2: every rank stops within the fault timeout (5 s)
# plus a little, rank 0 keeps steps 0 and 1 in the trace.
run hang "rank=1,step=2,kind=hang"
[ "$rc" -ne 0 ] || fail "hang: exit status 0"
[ "$rc" -ne 124 ] || fail "hang: still running after 60 s"
[ "$secs" -le 20 ] || fail "hang: took ${secs} s (> 20 s)"
grep -q 'dtsim: error: rank 0: no progress on any rank' hang.err || fail "hang: no watchdog message from rank 0"
grep -q 'rank(s) 1 did not reach it' hang.err || fail "hang: rank 0's message does not name rank 1"
grep -q 'dtsim: error: rank 1: ' hang.err || fail "hang: no message from rank 1"
[ -s hang.json ] || fail "hang: no partial trace"
grep -q '"traceEvents"' hang.json || fail "hang: partial trace is not a Chrome trace"
grep -q 'partial: 2 of 5 step' hang.json || fail "hang: partial trace does not hold steps 0-1"
grep -q '"step": *1' hang.json || fail "hang: step 1 missing from the partial trace"
valid_trace hang.json
! grep -q '"step": *2' hang.json || fail "hang: partial trace holds the unfinished step 2"

# Rank 1 exits at step 2: mpirun stops the job at once and names the rank;
# rank 0, stopped by mpirun's SIGTERM, still keeps the completed steps.
run exit "rank=1,step=2,kind=exit"
[ "$rc" -ne 0 ] || fail "exit: exit status 0"
[ "$secs" -le 20 ] || fail "exit: took ${secs} s (> 20 s)"
cat exit.out exit.err | grep -Eq 'Process name: \[\[[0-9]+,1\],1\]' || fail "exit: mpirun's message does not name rank 1"
grep -q 'rank(s) 1 did not reach it' exit.err || fail "exit: rank 0's message does not name rank 1"
grep -q 'partial: 2 of 5 step' exit.json || fail "exit: the trace of steps 0-1 was not kept"

# Rank 1 is killed (SIGKILL) at step 2: same.
run kill "rank=1,step=2,kind=kill"
[ "$rc" -ne 0 ] || fail "kill: exit status 0"
[ "$secs" -le 20 ] || fail "kill: took ${secs} s (> 20 s)"
grep -q 'process rank 1 .*exited on signal 9' kill.err || fail "kill: mpirun's message does not name rank 1"
grep -q 'partial: 2 of 5 step' kill.json || fail "kill: the trace of steps 0-1 was not kept"
valid_trace kill.json

# Rank 0 itself is killed (SIGKILL) at step 2: nothing of it runs after the
# kill, so steps 0-1 are there only because rank 0 kept them on disk between
# steps (a SIGKILL from mpirun 1 s after its SIGTERM is the same case).
run kill0 "rank=0,step=2,kind=kill"
[ "$rc" -ne 0 ] || fail "kill0: exit status 0"
[ "$secs" -le 20 ] || fail "kill0: took ${secs} s (> 20 s)"
grep -q 'process rank 0 .*exited on signal 9' kill0.err || fail "kill0: mpirun's message does not name rank 0"
grep -q 'partial: 2 of 5 step' kill0.json || fail "kill0: the trace of steps 0-1 was not kept"
! grep -q '"step": *2' kill0.json || fail "kill0: the kept trace holds the unfinished step 2"
valid_trace kill0.json

# Rank 1 stops itself (SIGSTOP) at step 2: the whole process freezes, its
# watchdog too. Rank 0 sees no heartbeat, names rank 1, keeps steps 0-1.
run stop "rank=1,step=2,kind=stop"
[ "$rc" -ne 0 ] || fail "stop: exit status 0"
[ "$secs" -le 30 ] || fail "stop: took ${secs} s (> 30 s)"
grep -q 'dtsim: error: rank 0: no progress on any rank' stop.err || fail "stop: no watchdog message from rank 0"
grep -q 'no heartbeat from rank(s) 1' stop.err || fail "stop: rank 0's message does not say rank 1 is stopped or dead"
grep -q 'partial: 2 of 5 step' stop.json || fail "stop: the trace of steps 0-1 was not kept"
valid_trace stop.json

# A task of rank 1 throws, with the watchdog off (--fault-timeout 0): rank 1's
# other streams give up their peer waits through the stop flag, rank 1 reports
# and aborts the job.
FAULT_TIMEOUT=0 run throw "rank=1,step=2,kind=throw"
[ "$rc" -ne 0 ] || fail "throw: exit status 0"
[ "$secs" -le 30 ] || fail "throw: took ${secs} s (> 30 s)"
grep -q 'dtsim: error on rank 1: injected task failure (DTSIM_FAULT_INJECT) at step 2' throw.err ||
  fail "throw: no message naming rank 1 and its failure"

# Rank 1 may use only 1.5 GiB of address space (a real ulimit -v) and the model's
# parameters, gradients and Adam state need more: it says so and the job stops.
# Under AddressSanitizer (the asan preset) this case cannot run: ASan reserves
# terabytes of shadow address space that ulimit -v takes away, and its
# operator new aborts where the release build's throws std::bad_alloc. The
# release suite runs it.
if ldd "$dtsim" | grep -q 'libasan'; then
  echo "SKIP nomem: $dtsim is built with AddressSanitizer, which cannot run under ulimit -v and aborts instead of throwing bad_alloc; the release build's run of this script covers it"
else
  start=$SECONDS
  within 60 mpirun -np 1 "$dtsim" execute --model mlp-4x8192 --micro-batch 8 --steps 3 --fault-timeout 5 \
    : -np 1 bash -c 'ulimit -v 1572864 && exec "$0" "$@"' "$dtsim" execute --model mlp-4x8192 --micro-batch 8 \
    --steps 3 --fault-timeout 5 > nomem.out 2> nomem.err
  rc=$?; secs=$((SECONDS - start))
  echo "== nomem: exit status $rc after ${secs} s"; cat nomem.out nomem.err
  [ "$rc" -ne 0 ] || fail "nomem: exit status 0"
  [ "$secs" -le 30 ] || fail "nomem: took ${secs} s (> 30 s)"
  grep -Eq 'dtsim: error on rank 1: out of memory' nomem.err || fail "nomem: no message naming rank 1 and the cause"
fi

# ZeRO-3 with NVMe offload writes real files to --io-dir; here it is a 16 MiB
# tmpfs (in a private mount namespace), too small for both ranks' files.
if unshare --mount true 2>/dev/null; then
  mkdir -p nvme
  start=$SECONDS
  DIR="$dir" DTSIM="$dtsim" within 60 unshare --mount bash -c '
    mount -t tmpfs -o size=16m tmpfs "$DIR/nvme" &&
    exec mpirun -np 2 --oversubscribe "$DTSIM" execute --model mlp-4x1024 --micro-batch 8 --steps 3 \
      --strategy deepspeed_stage_3_offload_nvme --io-dir "$DIR/nvme" --fault-timeout 5' > full.out 2> full.err
  rc=$?; secs=$((SECONDS - start))
  echo "== full disk: exit status $rc after ${secs} s"; cat full.out full.err
  [ "$rc" -ne 0 ] || fail "full disk: exit status 0"
  [ "$secs" -le 30 ] || fail "full disk: took ${secs} s (> 30 s)"
  grep -Eq "dtsim: error on rank [01]: .*I/O file .*No space left on device" full.err ||
    fail "full disk: no message naming the rank and ENOSPC"
else
  echo "SKIP full disk: cannot create a mount namespace here to mount a small tmpfs (unshare --mount failed)"
fi
echo "OK"
