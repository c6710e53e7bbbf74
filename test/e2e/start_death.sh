#!/usr/bin/env bash
# A rank killed as it starts, before the others ever heard from it, in a
# job that cannot do without it (Hogwild, all_groups_required = true):
# the job fails naming it, soon.  The survivors take a rank never heard
# from for one slow to start (progress_timeout, 300 s), so group 0 trained
# on alone and then waited on its dead peer until the launcher's grace
# (60 s without progress) ran out; now the launcher, which saw the rank
# end, stops them once they had heartbeat_timeout to find it lost.
set -uo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { cat "$dir/out" 2>/dev/null; echo "FAIL: $*"; exit 1; }
ws=$dir/ws

# paced, and long: group 0 alone would train for minutes
SHOAL_INJECT_STEP_DELAY=0:20 timeout -k 5 "$(scaled 120)" "$build/shoal" run examples/fashion-mnist/mlp.conf \
  --topology conf/hogwild.conf -o job.epochs=0 -o job.train_steps=100000 -o job.test_freq=0 -o job.test_steps=2 \
  -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -o cluster.heartbeat_timeout=2 -o cluster.heartbeat_interval=0.5 \
  --workspace "$ws" >"$dir/out" 2>&1 &
pid=$!
victim=
for _ in $(seq "$(scaled 3000)"); do  # rank 1 at first sight (bounded: 30 s)
  victim=$(pgrep -f "shoal proc $ws/job.conf --rank 1 ") && break
  sleep 0.01
done
[ -n "$victim" ] || fail "rank 1 never started"
kill -KILL "$victim"
status=0
wait "$pid" || status=$?
pid=
[ "$status" -ne 124 ] || fail "the job was still running $(scaled 120) s after rank 1 was killed"
[ "$status" -eq 1 ] || fail "exit $status, expected 1"
grep -q "^shoal run: .*processes failed; first rank 1 (2 workers of group 1, 2 servers): killed by signal 9" "$dir/out" \
  || fail "the last line does not name rank 1"
grep -qF "shoal run: the others went on after a process the job needs ended; stopping 1 process" "$dir/out" \
  || grep -qF "lost: no heartbeat for" "$dir/out" || fail "nothing stopped the survivors"
grep "^shoal run: " "$dir/out"
echo "ok: rank 1 killed as it started: the job failed naming it"
