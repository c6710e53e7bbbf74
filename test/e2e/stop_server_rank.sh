#!/usr/bin/env bash
# A stop signal sent to a server process alone (a scheduler preempting
# its node, an operator's `kill PID`): the whole job stops as on Ctrl-C,
# every worker with a checkpoint, exit 130, and --resume finishes it.
# The server process used to serve on for 5 s waiting for its workers to
# say done (they never heard of the stop), exit 0 without a word, and
# the workers then failed on its closed port ("cannot connect:
# Connection refused", exit 1), with nothing to say why.
set -uo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { cat "$dir/out" 2>/dev/null; echo "FAIL: $*"; exit 1; }
args=(examples/fashion-mnist/mlp.conf --topology conf/downpour.conf -o job.epochs=0 -o job.train_steps=400
      -o job.checkpoint_freq=50 -o job.test_freq=0 -o job.test_steps=2 -o job.disp_freq=10
      -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32')
ws=$dir/ws

# paced (20 ms a step) so that the signal finds it training
SHOAL_INJECT_STEP_DELAY=0:20,1:20 timeout -k 5 "$(scaled 120)" "$build/shoal" run "${args[@]}" --workspace "$ws" \
  >"$dir/out" 2>&1 &
pid=$!
for _ in $(seq "$(scaled 300)"); do  # until both groups train (bounded: 30 s)
  [ "$(cat "$ws/metrics.jsonl" 2>/dev/null | grep -c '"phase":"train"')" -ge 2 ] && break
  sleep 0.1
done
server=$(pgrep -f "shoal proc $ws/job.conf --rank 2 ") || fail "no server process (rank 2) to signal"
kill -TERM "$server"
status=0
wait "$pid" || status=$?
pid=
[ "$status" -eq 130 ] || fail "the job ended with exit $status, not 130 (stopped)"
grep -qF "shoal run: rank 2 (2 servers) was sent SIGTERM; stopping 3 processes with a checkpoint" "$dir/out" \
  || fail "the launcher did not say which rank was sent the signal"
for g in 0 1; do
  grep -qE "\[group $g worker 0\] stopped at step [0-9]+ on request; checkpoint saved" "$dir/out" \
    || fail "group $g did not stop with a checkpoint"
done
echo "ok: SIGTERM to the server process stopped the job with a checkpoint (exit 130)"

timeout -k 5 "$(scaled 120)" "$build/shoal" run "${args[@]}" --workspace "$ws" --resume >"$dir/out" 2>&1 \
  || fail "--resume after the stop: exit $?"
grep -q "^final test accuracy: 0\.[0-9]*$" "$dir/out" || fail "--resume printed no final accuracy"
for g in 0 1; do
  [ "$(grep -c "\"step\":400,\"group\":$g,\"worker\":0,\"phase\":\"train\"" "$ws/metrics.jsonl")" -eq 1 ] \
    || fail "group $g's last train line is not there once"
done
echo "ok: --resume finished it"
