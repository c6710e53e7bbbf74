#!/usr/bin/env bash
# Exact resume of the metrics (issue 23, item 3): a run stopped by SIGINT
# mid-window and resumed writes the same metrics.jsonl as a run never
# stopped - every train and test line with the same step, loss, accuracy,
# other metrics and samples counter - once the fields that measure time
# (time, samples_per_sec, compute_s, wait_s, peer_wait_s) and the
# processes' traffic lines are set aside.  The test passes read 3 batches
# each (test_steps), so they must go on from the test cursor the stopped
# run left; the stop lands between two display lines (disp_freq 10) and,
# in one case, on a test step.  For every scheme whose result does not
# depend on timing: one process, a server in its own process, Sandblaster
# and AllReduce.  (The asynchronous schemes apply gradients in the order
# they arrive: two uninterrupted runs differ already.)
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
dir=$(mktemp -d)
run_pid=
cleanup() {
  [ -n "$run_pid" ] && kill -KILL "$run_pid" 2>/dev/null
  local pids
  pids=$(pgrep -f -- "$dir/" || true)
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

common=(examples/fashion-mnist/mlp.conf -o job.epochs=0 -o job.train_steps=90 -o job.test_freq=20
        -o job.test_steps=3 -o job.disp_freq=10 -o job.checkpoint_freq=0 -o 'layer data.batch_size=100'
        -o 'layer fc1.num_output=64' -o 'layer fc2.num_output=64' -o cluster.rpc_threads=1 -q)

normalized() {  # WORKSPACE: its train and test lines without the fields that measure time, sorted
  /usr/bin/python3 - "$1/metrics.jsonl" <<'PY'
import json, sys
out = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["phase"] not in ("train", "test"):
        continue
    for k in ("time", "samples_per_sec", "compute_s", "wait_s", "peer_wait_s"):
        r.pop(k, None)
    out.append(json.dumps(r, sort_keys=True))
print("\n".join(sorted(out)))
PY
}

# check NAME STOP_FROM ARGS...: uninterrupted against stopped and resumed.
# Every step from STOP_FROM waits 10 minutes; the SIGINT cuts the wait
# short and the run stops at the boundary after the next (STOP_FROM + 2:
# the first worker to see a stop picks step + 1 for all)
check() {
  local name=$1 from=$2
  shift 2
  local whole=$dir/$name-whole ws=$dir/$name
  timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run "${common[@]}" "$@" --workspace "$whole" >/dev/null 2>"$dir/err" \
    || { cat "$dir/err"; fail "$name: the uninterrupted run"; }
  SHOAL_INJECT_STEP_DELAY=0:600000@$from timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run "${common[@]}" "$@" \
    --workspace "$ws" >"$dir/stop.out" 2>"$dir/stop.err" &
  run_pid=$!
  for _ in $(seq "$(scaled 1200)"); do  # until the delay holds it (bounded: 120 s)
    grep -q "\"step\":$((from / 10 * 10)),.*\"phase\":\"train\"" "$ws/metrics.jsonl" 2>/dev/null && break
    kill -0 "$run_pid" 2>/dev/null || break
    sleep 0.1
  done
  sleep 0.5
  pkill -INT -P "$run_pid" -x shoal || true   # the run under timeout: its launcher forwards it
  local rc=0
  wait "$run_pid" || rc=$?
  run_pid=
  [ "$rc" -eq 130 ] || { cat "$dir/stop.out" "$dir/stop.err"; fail "$name: the stopped run: exit $rc, expected 130"; }
  local at
  at=$(grep -o 'stopped at step [0-9]*' "$dir/stop.out" | head -1 | grep -o '[0-9]*$')
  timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run "${common[@]}" "$@" --workspace "$ws" --resume >/dev/null 2>"$dir/err" \
    || { cat "$dir/err"; fail "$name: the resumed run"; }
  if ! diff <(normalized "$whole") <(normalized "$ws") >"$dir/diff"; then
    head -20 "$dir/diff"
    fail "$name: stopped at step $at and resumed, its metrics differ from the uninterrupted run's"
  fi
  echo "ok: $name: stopped at step $at, resumed: $(normalized "$ws" | wc -l) metrics lines as never stopped"
}

check one-process 45
check test-step 38
check separate-server 45 -o cluster.server_worker_separate=true
check sandblaster 45 --topology conf/sandblaster.conf
check allreduce 45 --topology conf/allreduce.conf
echo "resume_metrics: ok"
