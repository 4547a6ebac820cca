#!/usr/bin/env bash
# Faults under `mpirun -np 2 dtsim execute`: a hung rank and a dead rank stop
# the job quickly, non-zero, with a message naming the rank, and (for a hang)
# the trace of the steps completed is kept. Uses the test hook DTSIM_FAULT_INJECT.
#   Usage: execute_faults.sh path/to/dtsim
source "$(dirname "$0")/common.sh"
set +e
dtsim="$1"
enter_scratch_dir
dir="$scratch"
fail() { echo "FAIL: $*"; exit 1; }
run() {  # run NAME INJECTION: mpirun under `timeout 60`, sets rc and secs
  local name="$1"
  local start=$SECONDS
  DTSIM_FAULT_INJECT="$2" timeout 60 mpirun -np 2 --oversubscribe -x DTSIM_FAULT_INJECT "$dtsim" execute \
    --model mlp-4x128 --micro-batch 8 --steps 5 --fault-timeout 5 --trace "$name.json" > "$name.out" 2> "$name.err"
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
echo "OK"
