#!/usr/bin/env bash
# One live run per workspace (issue 23, item 1): while a Downpour run
# trains in a workspace, a second `shoal run` into it - plain, --force,
# --resume, one process or several - is refused at once (exit 1, naming
# the holder's pid and host) and changes nothing there; the first run
# ends with its own result.  Its launcher killed with SIGKILL, its
# ranks still hold the claim until they end.  Once every process of it
# ended, a run is accepted (no stale claim), and --resume continues it.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh
dir=$(mktemp -d)
first=
cleanup() {
  [ -n "$first" ] && kill -KILL "$first" 2>/dev/null
  local pids
  pids=$(pgrep -f -- "$dir/" || true)
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
ws=$dir/ws
args=(examples/fashion-mnist/mlp.conf --topology conf/downpour.conf "${TOPOLOGY_ARGS[@]}"
      -o job.train_steps=400 -o job.checkpoint_freq=50 -q)

# start_first: a Downpour run whose groups take 20 ms a step from step 20
# on, so that it still trains while the others knock (bounded: 400 steps)
start_first() {
  SHOAL_INJECT_STEP_DELAY=0:20@20,1:20@20 timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run "${args[@]}" \
    --workspace "$ws" "$@" >"$dir/first.out" 2>"$dir/first.err" &
  first=$!
  for _ in $(seq "$(scaled 600)"); do
    grep -q '"phase":"train"' "$ws/metrics.jsonl" 2>/dev/null && return 0
    kill -0 "$first" 2>/dev/null || break
    sleep 0.1
  done
  cat "$dir/first.err"
  fail "the first run never trained"
}

snapshot() { (cd "$ws" && ls job.conf token; sha256sum job.conf token) 2>/dev/null; }

refused() {  # ARGS...: a second run is refused, naming the first
  local rc=0
  timeout -k 10 "$(scaled 60)" "$BUILD/shoal" run "$@" --workspace "$ws" >"$dir/second.out" 2>"$dir/second.err" || rc=$?
  [ "$rc" -eq 1 ] || { cat "$dir/second.out" "$dir/second.err"; fail "$*: exit $rc, expected 1"; }
  grep -q "the workspace is in use by another run (pid [0-9]* on host $(hostname)" "$dir/second.err" \
    || { cat "$dir/second.err"; fail "$*: no message naming the first run"; }
  [ ! -e "$ws/previous" ] || fail "$*: the first run's files were moved aside"
  echo "ok: refused: ${*: -1}"
}

start_first
before=$(snapshot)
refused "${args[@]}"
refused "${args[@]}" --force
refused "${args[@]}" --resume
refused examples/fashion-mnist/mlp.conf "${TOPOLOGY_ARGS[@]}" -q
[ "$(snapshot)" = "$before" ] || fail "the refused runs changed job.conf or the token"
rc=0
wait "$first" || rc=$?
first=
[ "$rc" -eq 0 ] || { cat "$dir/first.err"; fail "the first run: exit $rc"; }
grep -q "^final test accuracy: " "$dir/first.out" || fail "the first run printed no result"
# its result is its own: the last test of group 0 at step 400
grep -q '"step":400,"group":0,.*"phase":"test"' "$ws/metrics.jsonl" || fail "no test of step 400 in metrics"
echo "ok: the first run ended with its own result"

# the launcher killed: its ranks (stopping on their own) keep the claim
ws=$dir/ws2
start_first -o job.train_steps=100000
launcher_pid=$(pgrep -P "$first" -x shoal)  # $first is timeout's pid
[ -n "$launcher_pid" ] || fail "no launcher under timeout"
kill -KILL "$launcher_pid"
wait "$first" 2>/dev/null || true
first=
if pgrep -f -- "proc $ws/job.conf" >/dev/null; then
  rc=0
  timeout -k 10 "$(scaled 60)" "$BUILD/shoal" run "${args[@]}" --workspace "$ws" >"$dir/second.out" 2>"$dir/second.err" || rc=$?
  if pgrep -f -- "proc $ws/job.conf" >/dev/null; then
    [ "$rc" -eq 1 ] && grep -q "in use by another run" "$dir/second.err" \
      || { cat "$dir/second.err"; fail "a run was accepted while the killed launcher's ranks ran"; }
    echo "ok: refused while the killed launcher's ranks run"
  fi
fi
for _ in $(seq "$(scaled 600)"); do  # they end on their own (bounded: 60 s)
  pgrep -f -- "proc $ws/job.conf" >/dev/null || break
  sleep 0.1
done
pgrep -f -- "proc $ws/job.conf" >/dev/null && fail "the killed launcher's ranks did not end"

# no stale claim: a new run is accepted and resumes
rc=0
timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run "${args[@]}" --workspace "$ws" --resume >"$dir/third.out" 2>"$dir/third.err" \
  || rc=$?
[ "$rc" -eq 0 ] || { cat "$dir/third.err"; fail "the resume after the killed run: exit $rc"; }
echo "ok: accepted once the earlier run ended (resumed: $(grep -c . "$ws/metrics.jsonl") metrics lines)"
echo "workspace_busy: ok"
