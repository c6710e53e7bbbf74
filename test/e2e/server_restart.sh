#!/usr/bin/env bash
# kill -9 of the server process under Sandblaster: the workers see the
# error, the launcher restarts the job from the last checkpoint, and the
# job ends with exactly the params of a run that was never interrupted
# (no loss beyond the checkpoint: the steps after it are recomputed).
set -euo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
dir=$(mktemp -d)
launcher=
cleanup() {
  [ -n "$launcher" ] && kill "$launcher" 2>/dev/null
  local pids
  pids=$(pgrep -f -- "$dir/" || true)
  [ -n "$pids" ] && kill $pids 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

args=(-o job.epochs=0 -o job.train_steps=120 -o job.test_freq=0 -o job.disp_freq=10
      -o job.checkpoint_freq=20 -o 'layer fc1.num_output=96' -o 'layer fc2.num_output=96'
      -o cluster.server_worker_separate=true -q)
final () { grep '"phase":"test"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"loss":\([^,}]*\).*"accuracy":\([^,}]*\).*/\1 \2/'; }

"$build/shoal" run examples/fashion-mnist/mlp.conf "${args[@]}" --workspace "$dir/whole" >/dev/null 2>&1
whole=$(final "$dir/whole")

# 40 ms a step keeps the job alive long enough to kill its server (the math is the same)
SHOAL_INJECT_STEP_DELAY=0:40 timeout -k 10 "$(scaled 200)" "$build/shoal" run examples/fashion-mnist/mlp.conf \
  "${args[@]}" --workspace "$dir/ws" >"$dir/out" 2>"$dir/err" &
launcher=$!
for _ in $(seq "$(scaled 300)"); do  # until a checkpoint past step 20 is written (bounded: 30 s)
  grep -q '"step":50,' "$dir/ws/metrics.jsonl" 2>/dev/null && break
  sleep 0.1
done
server=$(pgrep -f -- "proc $dir/ws/job.conf --rank 1 " | head -1)
[ -n "$server" ] || { cat "$dir/err"; echo "no server process"; exit 1; }
kill -KILL "$server"
rc=0
wait "$launcher" || rc=$?
launcher=
grep -v '^\*\*' "$dir/err" | tail -15
[ "$rc" -eq 0 ] || { cat "$dir/out"; echo "exit $rc"; exit 1; }
grep -qF "a server process died; restarting from the last checkpoint (restart 1 of 3)" "$dir/err"
grep -qE "^shoal run: resuming at step (20|40)$" "$dir/out" "$dir/err" 2>/dev/null \
  || grep -qE "resuming at step (20|40)" "$dir/err"
restarted=$(final "$dir/ws")
echo "uninterrupted: $whole; server killed and restarted: $restarted"
[ "$restarted" = "$whole" ]
