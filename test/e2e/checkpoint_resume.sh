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
source test/e2e/lib/time_scale.sh "$build"
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

# 2. SIGINT while it trains.  From step 40 on every step waits 10 minutes
#    (a stop request cuts the wait short; the math is the same), so the run
#    cannot end before the signal: it comes once step 10 is in the
#    metrics, and the run must stop with a checkpoint (exit 130).  timeout
#    bounds the run and passes the SIGINT on once: --foreground, because
#    without it timeout also signals its process group, a second SIGINT,
#    which ends a run at once (seen on the ASan build).
SHOAL_INJECT_STEP_DELAY=0:600000@40 \
  timeout --foreground -s INT -k 10 "$(scaled 240)" "$build/shoal" run examples/fashion-mnist/mlp.conf "${common[@]}" -o job.train_steps=80 \
  -o job.checkpoint_freq=0 --workspace "$dir/sig" >"$dir/sig.out" 2>&1 &
pid=$!
trained=0
for _ in $(seq "$(scaled 600)"); do  # until step 10 is in the metrics (bounded: 60 s)
  grep -q '"phase":"train"' "$dir/sig/metrics.jsonl" 2>/dev/null && { trained=1; break; }
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
[ "$trained" -eq 1 ] || { cat "$dir/sig.out"; echo "the SIGINT run never reached step 10"; exit 1; }
kill -INT "$pid"
status=0
wait "$pid" || status=$?
[ "$status" -eq 130 ] || { cat "$dir/sig.out"; echo "SIGINT: exit $status, expected 130"; exit 1; }
grep -q "stopped at step .* with a checkpoint; continue with --resume" "$dir/sig.out" \
  || { cat "$dir/sig.out"; echo "SIGINT: no checkpoint reported"; exit 1; }
stopped=$(sed -n 's/^stopped at step \([0-9]*\) with a checkpoint.*/\1/p' "$dir/sig.out")
[ "$stopped" -ge 10 ] && [ "$stopped" -le 42 ] || { echo "SIGINT: stopped at step '$stopped', not in 10..42"; exit 1; }
run -o job.train_steps=80 -o job.checkpoint_freq=0 --workspace "$dir/sig" --resume >/dev/null
sig=$(final "$dir/sig")
echo "SIGINT (stopped at step $stopped): $sig"

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
