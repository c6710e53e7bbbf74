#!/usr/bin/env bash
# Exact resume: a run interrupted at step N and resumed ends with the same
# params as an uninterrupted run (same final test loss and accuracy to
# every printed digit).  Batches of 1000 make an epoch 60 steps, so the
# runs cross an epoch boundary (the data cursor and the shuffle replay).
# Interrupted three ways: a run that ends early (its final checkpoint), a
# SIGINT in the middle (a checkpoint, then a clean exit), and the same
# over Thrift with the server in a process of its own.
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

common=(-o job.epochs=0 -o job.test_freq=0 -o job.disp_freq=10 -o job.checkpoint_freq=25
        -o 'layer data.batch_size=1000' -o 'layer fc1.num_output=96' -o 'layer fc2.num_output=96'
        -o updater.lr_list=0.05,0.01 -o 'updater.step_list=0,50' -q)

final () {  # the last test line of a workspace: "loss accuracy"
  grep '"phase":"test"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"loss":\([^,}]*\).*"accuracy":\([^,}]*\).*/\1 \2/'
}

run () { "$build/shoal" run examples/fashion-mnist/mlp.conf "${common[@]}" "$@"; }

run -o job.train_steps=80 --workspace "$dir/whole" >/dev/null
whole=$(final "$dir/whole")
echo "uninterrupted:       $whole"

# 1. ends at step 55 (a checkpoint at 25, 50 and the end), resumed to 80
run -o job.train_steps=55 --workspace "$dir/early" >/dev/null
run -o job.train_steps=80 --workspace "$dir/early" --resume >/dev/null
early=$(final "$dir/early")
echo "stopped at 55:       $early"

# 2. SIGINT while it trains (slowed by 30 ms a step so that it is still
#    training when the signal comes; the math is the same)
SHOAL_INJECT_STEP_DELAY=0:30 \
  "$build/shoal" run examples/fashion-mnist/mlp.conf "${common[@]}" -o job.train_steps=80 \
  -o job.checkpoint_freq=0 --workspace "$dir/sig" >"$dir/sig.out" 2>&1 &
pid=$!
for _ in $(seq 200); do  # until it trains (bounded: 20 s)
  grep -q '"phase":"train"' "$dir/sig/metrics.jsonl" 2>/dev/null && break
  sleep 0.1
done
kill -INT "$pid"
status=0
wait "$pid" || status=$?
if [ "$status" -eq 130 ]; then
  grep -q "stopped at step .* with a checkpoint; continue with --resume" "$dir/sig.out"
  run -o job.train_steps=80 -o job.checkpoint_freq=0 --workspace "$dir/sig" --resume >/dev/null
else
  # it finished before the signal arrived: nothing to resume, still a valid run
  [ "$status" -eq 0 ] || { cat "$dir/sig.out"; exit 1; }
fi
sig=$(final "$dir/sig")
echo "SIGINT (exit $status): $sig"

# 3. over Thrift, the server in its own process
sep=(-o cluster.server_worker_separate=true)
run "${sep[@]}" -o job.train_steps=80 --workspace "$dir/rwhole" >/dev/null
run "${sep[@]}" -o job.train_steps=55 --workspace "$dir/rearly" >/dev/null
run "${sep[@]}" -o job.train_steps=80 --workspace "$dir/rearly" --resume >/dev/null
rwhole=$(final "$dir/rwhole")
rearly=$(final "$dir/rearly")
echo "separate server:     $rwhole / resumed $rearly"

[ "$early" = "$whole" ] || { echo "resume after an early end differs"; exit 1; }
[ "$sig" = "$whole" ] || { echo "resume after SIGINT differs"; exit 1; }
[ "$rearly" = "$rwhole" ] || { echo "resume over Thrift differs"; exit 1; }
