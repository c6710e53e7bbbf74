#!/usr/bin/env bash
# `shoal run --rejoin` (asynchronous schemes, [cluster]
# all_groups_required = false): a worker group's process killed with
# SIGKILL while the others train is restarted by the launcher and rejoins
# the running job with the current values, and the job ends with exit 0
# and every group tested at the final step:
#  1. Downpour: the restarted group pulls the servers' values;
#  2. Hogwild: the restarted rank (workers and their servers) takes its
#     slices from their masters.  Before the fix the survivor learned
#     from the rejoined process's own replies (it lists itself as lost
#     once) that it was lost, and dropped it again half a second after
#     each of its 3 restarts.
# No process lists the rejoined group among the lost at the end (a
# Downpour worker process hears of the restart from the servers only).
# "With the current values": the restarted group's first train line
# (step 20 again) has a lower loss than the first process's step 20.
# Group 0 sleeps 15 ms a step (a test hook), so the others still train
# when group 1 is killed.  The two cases run at once.  Every run is
# bounded by timeout(1).
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh   # TOPOLOGY_ARGS, fail
dir=$(mktemp -d)
launcher=
cleanup() {
  [ -n "$launcher" ] && kill "$launcher" 2>/dev/null
  local pids
  pids=$(pgrep -f -- "$dir/" || true)
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

case_rejoin () {  # SCHEME
  local name=$1 ws=$dir/$1 rc=0
  SHOAL_INJECT_STEP_DELAY=0:15 timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf \
    --topology "conf/$name.conf" "${TOPOLOGY_ARGS[@]}" -o job.disp_freq=20 -o cluster.all_groups_required=false \
    -o cluster.heartbeat_interval=0.5 -o cluster.heartbeat_timeout=3 -q --rejoin --workspace "$ws" \
    >"$dir/$name.out" 2>"$dir/$name.err" &
  launcher=$!
  local trained=0
  for _ in $(seq "$(scaled 600)"); do   # group 1's first train line (bounded: 60 s)
    grep -q '"group":1,"worker":0,"phase":"train"' "$ws/metrics.jsonl" 2>/dev/null && { trained=1; break; }
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.1
  done
  [ "$trained" -eq 1 ] || { cat "$dir/$name.err"; fail "$name: group 1 never trained"; }
  local pid
  pid=$(pgrep -f -- "proc $ws/job.conf --rank 1 " | head -1)
  [ -n "$pid" ] || fail "$name: no rank 1 process"
  kill -KILL "$pid"
  wait "$launcher" || rc=$?
  launcher=
  cat "$dir/$name.out"
  grep -v '^\*\*' "$dir/$name.err" | grep -v '^$' || true
  [ "$rc" -ne 124 ] || fail "$name: hung (timeout)"
  [ "$rc" -eq 0 ] || fail "$name: exit $rc"
  grep -qF "killed by signal 9 (Killed); restarting it to rejoin the running job (restart 1 of 3)" "$dir/$name.err" \
    || fail "$name: no restart to rejoin"
  grep -q "restart 2 of 3" "$dir/$name.err" && fail "$name: the rejoined process was lost again"
  grep -qE "^rank 1 \(2 workers of group 1(, 2 servers)?\): exit 0 \(restarted, rejoined the job\)$" "$dir/$name.out" \
    || fail "$name: rank 1 did not end rejoined"
  # no process lists the rejoined group among the lost: Hogwild's rank 0
  # hears the restart itself, Downpour's learns it from the servers'
  # heartbeat replies (before the fix it listed the group as lost)
  ! grep -q "worker groups lost and dropped: group 1" "$dir/$name.out" \
    || fail "$name: rank 0 still counts the rejoined group as lost"
  /usr/bin/python3 test/e2e/lib/rejoined_metrics.py "$ws/metrics.jsonl" || fail "$name: metrics"
  if pgrep -f -- "$ws/" >/dev/null; then pgrep -fa -- "$ws/"; fail "$name: processes left behind"; fi
  echo "$name: ok"
}

# both at once (each mostly waits for group 0's paced steps), each
# case's lines printed when it ends
pids=()
for scheme in downpour hogwild; do
  ( case_rejoin "$scheme" ) >"$dir/case-$scheme.log" 2>&1 &
  pids+=("$!")
done
failed=0
for i in 0 1; do
  wait "${pids[$i]}" || failed=1
done
cat "$dir/case-downpour.log" "$dir/case-hogwild.log"
[ "$failed" -eq 0 ] || fail "a case failed (above)"
echo "rejoin: ok"
