#!/usr/bin/env bash
# Liveness (issue 12): a rank that is stopped (SIGSTOP, never continued),
# killed or wedged is found lost within the [cluster] timeouts, named
# with why, and the job then ends as its conf says - never hangs:
#  1. Downpour, group 1 stopped, all groups required: the job fails
#     naming group 1 as soon as it is found lost (before the fix it hung
#     forever), also in its last line (which said what the last ranks
#     saw, "connection closed", when the server process ended first);
#  2. the same with all_groups_required = false: group 0 finishes, exit 0;
#  3. Downpour, the server rank stopped, --no-restart: a clear error;
#  4. Hogwild, group 0 killed, all_groups_required = false: group 1
#     takes over group 0's slices and finishes, and "(null)" is printed
#     nowhere (it was: the survivor failed in apply_delta);
#  5. SSP, group 1 stopped: it leaves the staleness bound, group 0
#     finishes (it used to wait for an RPC timeout, then fail);
#  6. a wedged worker (beats, but no step for progress_timeout) is lost;
#  7. ranks started without the launcher (as mpirun would): the server
#     rank's own heartbeats find a stopped worker rank and drop its group.
# Every run is bounded by timeout(1); no timing is asserted.  The cases
# are independent jobs in workspaces of their own: they run in three
# lanes at once (1, 2, 4 | 3, 5, 6 | 7), each lane's lines printed when
# it ends, which takes a third of the time of one after the other (most
# of a case is the wait for a heartbeat timeout).
# Usage: liveness.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh

dir=$(mktemp -d)
launcher=
stopped=()
cleanup() {
  [ -n "$launcher" ] && kill "$launcher" 2>/dev/null
  local p
  for p in "${stopped[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  local pids
  pids=$(pgrep -f -- "$dir/" || true)
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

FAST=(-o cluster.heartbeat_interval=0.5 -o cluster.heartbeat_timeout=3)

# start NAME TOPOLOGY STEPS [ARGS...]: a run in the background
start() {
  local name=$1 topo=$2 steps=$3
  shift 3
  local ws="$dir/$name"
  timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf --topology "conf/$topo.conf" \
    "${TOPOLOGY_ARGS[@]}" -o job.train_steps="$steps" -o job.disp_freq=20 "${FAST[@]}" -q \
    --workspace "$ws" "$@" >"$dir/$name.out" 2>"$dir/$name.err" &
  launcher=$!
  # until both groups train, then 0.3 s: a rank faulted before its first
  # heartbeat reached the servers (they retry first contact every 0.1 s)
  # is "never heard from" to them, which only progress_timeout ends (a
  # clean-clone make test once stopped group 1 while only group 0 had
  # trained: group 0 ran all its 100000 steps and the server never named
  # group 1 lost)
  for _ in $(seq "$(scaled 300)"); do
    if grep -q '"group":1,.*"phase":"train"' "$ws/metrics.jsonl" 2>/dev/null \
       && grep -q '"group":0,.*"phase":"train"' "$ws/metrics.jsonl" 2>/dev/null; then
      sleep 0.3
      return 0
    fi
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.1
  done
  cat "$dir/$name.err"
  fail "$name: training never started"
}

rank_pid() {  # NAME RANK
  pgrep -f -- "proc $dir/$1/job.conf --rank $2 " | head -1
}

# finish NAME WANT_STATUS: waits for the launcher (timeout(1) bounds it: 124 is a hang)
finish() {
  local rc=0 start=$SECONDS
  wait "$launcher" || rc=$?
  launcher=
  echo "--- $1: exit $rc, $((SECONDS - start)) s after the fault"
  cat "$dir/$1.out"
  grep -v '^\*\*' "$dir/$1.err" || true
  [ "$rc" -ne 124 ] || fail "$1: hung (timeout)"
  [ "$rc" -eq "$2" ] || fail "$1: exit $rc, expected $2"
  if grep -qF "(null)" "$dir/$1.out" "$dir/$1.err"; then fail "$1: (null) printed"; fi
  if pgrep -f -- "$dir/$1/" >/dev/null; then
    pgrep -fa -- "$dir/$1/"
    fail "$1: processes left behind"
  fi
}

has() {  # NAME FILE TEXT
  grep -qF -- "$3" "$dir/$1.$2" || fail "$1: no '$3' in $2"
}

# 1. Downpour, a stopped group, every group required: the job fails at
# once (it cannot succeed), naming the group, with its checkpoints kept
case_required() {
start required downpour 100000
kill -STOP "$(rank_pid required 1)"
finish required 1
has required err "shoal run: rank 1 (2 workers of group 1) lost: no heartbeat for "
has required err "shoal proc (rank 2): rank 1 (2 workers of group 1) lost: "
has required err "; [cluster] all_groups_required = true: the job fails without its group (false: the others go on without it)"
# the job's last word names the lost rank and why, whatever the last
# ranks saw (the server process stopped the job and exited: rank 0 could
# read "connection closed")
last=$(grep -v '^\*\*' "$dir/required.err" | grep -v '^$' | tail -1)
[[ "$last" == "shoal run: "*" processes failed; "*"rank 2 (2 servers) stopped the job: rank 1 (2 workers of group 1) lost: "*"all_groups_required = true"* ]] \
  || fail "required: the last line does not name the lost rank and why: $last"
}

# 2. the same, not every group required: the job finishes without it
case_optional() {
start optional downpour 3000 -o cluster.all_groups_required=false
kill -STOP "$(rank_pid optional 1)"
finish optional 0
has optional err "shoal run: rank 1 (2 workers of group 1) lost: no heartbeat for "
has optional out "1 worker group lost (group 1); the job finished without it"
has optional out "final test accuracy: "
}

# 3. the server rank stopped: a clear error, no restart asked
case_server() {
start server downpour 100000 --no-restart
kill -STOP "$(rank_pid server 2)"
finish server 1
has server err "shoal run: rank 2 (2 servers) lost: no heartbeat for "
has server err "a server process died and --no-restart was given; the job stops here"
}

# 4. Hogwild, a group killed: the other takes over its slices and finishes
case_hogwild() {
start hogwild hogwild 3000 -o cluster.all_groups_required=false
sleep 1
kill -KILL "$(rank_pid hogwild 0)"
finish hogwild 0
has hogwild out "rank 1: worker groups lost and dropped: group 0 (rank 0: "
has hogwild out "1 worker group lost (group 0); the job finished without it"
has hogwild out "final test accuracy: "
if grep -qF "resuming at step" "$dir/hogwild.out" "$dir/hogwild.err"; then fail "hogwild: restarted"; fi
}

# 5. SSP, a stopped group leaves the staleness bound
case_ssp() {
start ssp ssp 3000 -o cluster.all_groups_required=false
for _ in $(seq "$(scaled 100)"); do grep -q '"group":1' "$dir/ssp/metrics.jsonl" && break; sleep 0.1; done
kill -STOP "$(rank_pid ssp 1)"
finish ssp 0
has ssp out "1 worker group lost (group 1); the job finished without it"
grep -qE "^group 0: test accuracy .* at step 3000$" "$dir/ssp.out" || fail "ssp: group 0 did not finish"
}

# 6. a wedged worker: alive, beating, no step
case_wedged() {
# (progress_timeout also bounds a rank's first contact: scaled, since a
# sanitized rank takes longer than 2 s to start under load)
SHOAL_INJECT_WEDGE=1@50 start wedged downpour 100000 -o cluster.progress_timeout="$(scaled 2)" --no-restart
finish wedged 1
has wedged err "shoal run: rank 1 (2 workers of group 1) lost: alive but no step done for "
}

# lane NAME CASE...: the cases one after the other, in the background,
# into NAME's log; a failing case ends its lane (fail exits the subshell)
lanes=()
lane() {
  local name=$1
  shift
  ( for c in "$@"; do "case_$c"; done ) >"$dir/lane-$name.log" 2>&1 &
  lanes+=("$!:$name")
}
lane a required optional hogwild
lane b server ssp wedged

# 7. no launcher: ranks started by hand, the server rank's heartbeats decide
ws="$dir/bare"
mkdir -p "$ws"
timeout -k 5 "$(scaled 60)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf --topology conf/downpour.conf \
  "${TOPOLOGY_ARGS[@]}" -o job.train_steps=1 -o cluster.all_groups_required=false "${FAST[@]}" -q --workspace "$ws" >/dev/null 2>&1 \
  || fail "bare: the conf did not run"
rm -rf "$ws/metrics.jsonl" "$ws/checkpoint"
printf 'job-token-for-the-test\n' >"$ws/token"
chmod 600 "$ws/token"
sed -i 's/^train_steps=.*/train_steps=3000/' "$ws/job.conf"
base=$(free_ports_base 3)
eps="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
pids=()
for r in 2 0 1; do
  "$BUILD/shoal" proc "$ws/job.conf" --rank $r --endpoints "$eps" --token-file "$ws/token" \
    --workspace "$ws" -q >"$dir/bare$r.out" 2>"$dir/bare$r.err" &
  pids[$r]=$!
done
for _ in $(seq "$(scaled 300)"); do
  grep -q '"group":1' "$ws/metrics.jsonl" 2>/dev/null && break
  sleep 0.1
done
kill -0 "${pids[1]}" 2>/dev/null || { tail -5 "$dir/bare1.err"; fail "bare: rank 1 ended before it was stopped"; }
kill -STOP "${pids[1]}"
stopped+=("${pids[1]}")
# bounded: 120 s for ranks 0 and 2 to end on their own
for _ in $(seq "$(scaled 1200)"); do
  kill -0 "${pids[0]}" 2>/dev/null || kill -0 "${pids[2]}" 2>/dev/null || break
  sleep 0.1
done
hung=0
for r in 0 2; do
  if kill -0 "${pids[$r]}" 2>/dev/null; then hung=1; kill -KILL "${pids[$r]}"; fi
done
rc0=0 rc2=0
wait "${pids[0]}" || rc0=$?
wait "${pids[2]}" || rc2=$?
kill -KILL "${pids[1]}" 2>/dev/null || true
[ "$hung" -eq 0 ] || fail "bare: ranks 0 and 2 still running after $(scaled 120) s (hung)"
echo "--- bare: rank 0 exit $rc0, rank 2 exit $rc2"
cat "$dir/bare0.out" "$dir/bare2.out"
grep -v '^\*\*' "$dir/bare2.err" || true
[ "$rc0" -eq 0 ] || fail "bare: rank 0 exit $rc0"
[ "$rc2" -eq 0 ] || fail "bare: rank 2 exit $rc2"
grep -qF "rank 2: worker groups lost and dropped: group 1 (rank 1: no heartbeat for " "$dir/bare2.out" \
  || fail "bare: rank 2 did not drop group 1"

# the lanes (each case bounded by timeout(1))
failed=0
for l in "${lanes[@]}"; do
  rc=0
  wait "${l%%:*}" || rc=$?
  cat "$dir/lane-${l#*:}.log"
  [ "$rc" -eq 0 ] || failed=1
done
[ "$failed" -eq 0 ] || fail "a lane failed (above)"
echo "liveness: ok"
