#!/usr/bin/env bash
# The launcher when things go wrong: a killed server process, a killed
# worker group (required, or not), and Ctrl-C.  Each run must end on its
# own, report which rank failed and how, exit as the conf says, and leave
# no process behind.  (test/e2e/server_restart.sh: the restart from a
# checkpoint after a server dies.)  The cases are independent runs in
# workspaces of their own: two lanes of two run at once (1, 2 | 2b, 3),
# each lane's lines printed when it ends.
# Usage: launch_faults.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh

dir=$(mktemp -d)
launcher=
cleanup() {
  [ -n "$launcher" ] && kill "$launcher" 2>/dev/null
  # anything of a run that failed its checks: only processes naming our directory
  local pids
  pids=$(pgrep -f -- "$dir/" || true)
  [ -n "$pids" ] && kill $pids 2>/dev/null

  rm -rf "$dir"
}
trap cleanup EXIT

# start NAME STEPS [ARGS...]: a Downpour run in the background (2 worker
# groups in ranks 0-1, servers in rank 2)
start() {
  local ws="$dir/$1" steps=$2
  shift 2
  timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf --topology conf/downpour.conf \
    "${TOPOLOGY_ARGS[@]}" -o job.train_steps="$steps" -o job.disp_freq=20 -q --workspace "$ws" "$@" \
    >"$dir/${ws##*/}.out" 2>"$dir/${ws##*/}.err" &
  launcher=$!
  # wait for training to be under way: a train line of each group (the
  # launcher's own first line comes before its ranks exist: under ASan
  # the server rank was looked for before it had started)
  for _ in $(seq "$(scaled 300)"); do
    grep -q '"group":0,.*"phase":"train"' "$ws/metrics.jsonl" 2>/dev/null \
      && grep -q '"group":1,.*"phase":"train"' "$ws/metrics.jsonl" 2>/dev/null && return 0
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.1
  done
  cat "$dir/$1.err"
  fail "$1: training never started"
}

rank_pid() {  # NAME RANK
  pgrep -f -- "proc $dir/$1/job.conf --rank $2 " | head -1
}

# finish NAME WANT_STATUS MAX_SECONDS: waits for the launcher
finish() {
  local start=$SECONDS rc=0
  wait "$launcher" || rc=$?
  launcher=
  local took=$((SECONDS - start))
  echo "--- $1: exit $rc after ${took} s"
  cat "$dir/$1.out" "$dir/$1.err" | grep -v '^\*\*' || true
  [ "$rc" -eq "$2" ] || fail "$1: exit $rc, expected $2"
  [ "$took" -le "$(scaled "$3")" ] || fail "$1: took $took s, more than $(scaled "$3")"
  if pgrep -f -- "$dir/$1/" >/dev/null; then
    pgrep -fa -- "$dir/$1/"
    fail "$1: processes left behind"
  fi
}

# 1. the server process dies, and --no-restart: both worker groups fail
# on their next call, and the job stops with the checkpoint kept
case_server() {
start server 100000 --no-restart
kill -KILL "$(rank_pid server 2)"
finish server 1 60
grep -qF "shoal run: rank 2 (2 servers): killed by signal 9 (Killed)" "$dir/server.err" \
  || fail "server: rank 2's death not reported"
grep -qF "shoal run: 3 of 3 processes failed" "$dir/server.err" || fail "server: summary"
grep -qF "a server process died and --no-restart was given; the job stops here" "$dir/server.err" \
  || fail "server: --no-restart not reported"
}

# 2. one worker group dies: Downpour goes on with the other; then the
# servers, still waiting for the dead rank to say it is done, are stopped.
# Group 0 must end its steps before the servers call rank 1 lost (with
# the default heartbeat_timeout, 15 s, the required group then fails the
# job: under TSan, and once in a plain build at load 15, the 600 steps
# took longer), so the servers' timeout is 60 s, scaled as the test's own
# bounds are: this case is about the watchdog, not the heartbeats
case_worker() {
start worker 600 -o cluster.heartbeat_timeout="$(scaled 60)"
kill -KILL "$(rank_pid worker 1)"
finish worker 1 60
grep -qE "^rank 0 \(2 workers of group 0\): exit 0$" "$dir/worker.out" \
  || fail "worker: group 0 did not finish its training"
grep -qF "shoal run: rank 1 (2 workers of group 1): killed by signal 9 (Killed)" "$dir/worker.err" \
  || fail "worker: rank 1's death not reported"
grep -qF "the worker processes ended but server processes are still waiting; stopping 1 process" \
  "$dir/worker.err" || fail "worker: the watchdog did not stop the servers"
grep -qE "^group 0: test accuracy " "$dir/worker.out" || fail "worker: no result of group 0"
}

# 2b. the same when the conf does not require every group: the job
# finishes without the lost group and exits 0
case_lost() {
start lost 600 -o cluster.all_groups_required=false
kill -KILL "$(rank_pid lost 1)"
finish lost 0 60
grep -qF "rank 1 (2 workers of group 1): killed by signal 9 (Killed): the group is lost; the others go on" \
  "$dir/lost.err" || fail "lost: the lost group not reported"
grep -qF "1 worker group lost (group 1); the job finished without it" "$dir/lost.out" || fail "lost: summary"
grep -qE "^final test accuracy: " "$dir/lost.out" || fail "lost: no final accuracy"
}

# 3. Ctrl-C: forwarded once to every rank, exit 130
case_interrupt() {
start interrupt 100000
kill -INT "$launcher"
finish interrupt 130 30
grep -qF "shoal run: Interrupt: stopping 3 processes" "$dir/interrupt.err" || fail "interrupt: not forwarded"
grep -qF "shoal run: interrupted" "$dir/interrupt.err" || fail "interrupt: not reported"
}

pids=()
for lane in "server worker" "lost interrupt"; do
  ( for c in $lane; do "case_$c"; done ) >"$dir/lane-${lane%% *}.log" 2>&1 &
  pids+=("$!")
done
failed=0
for p in "${pids[@]}"; do
  wait "$p" || failed=1
done
cat "$dir/lane-server.log" "$dir/lane-lost.log"
[ "$failed" -eq 0 ] || fail "a case failed (above)"
echo "launch faults: ok"
