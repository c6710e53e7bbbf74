#!/usr/bin/env bash
# Sandblaster's cost over Thrift: samples/s of one worker whose server is
# in the same process (direct calls, params read in place) against one
# worker with its server in a second process on loopback (every step
# pushes the gradient and pulls the params over Thrift, overlapped with
# backward by the comm thread).  Prints the step-time ratio
# (separate / in-process; the target is <= 1.10).
#   bench/sandblaster.sh [BUILD_DIR]     knobs: BENCH_SB_REPEATS=3 BENCH_SB_STEPS_MLP=400 BENCH_SB_STEPS_CNN=150
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
REPEATS=${BENCH_SB_REPEATS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=bench/lib.sh
. bench/lib.sh

printf "%-5s %-28s %12s\n" model layout samples/s
for model in mlp cnn; do
  steps=$([ $model = mlp ] && echo "${BENCH_SB_STEPS_MLP:-400}" || echo "${BENCH_SB_STEPS_CNN:-150}")
  common=(-o job.epochs=0 -o "job.train_steps=$steps" -o job.test_freq=0 -o job.test_steps=1
          -o job.disp_freq=25 -q)
  # interleaved, so that load from outside hits both layouts alike
  for i in $(seq "$REPEATS"); do
    for layout in in-process separate; do
      extra=()
      [ $layout = separate ] && extra=(-o cluster.server_worker_separate=true)
      ws="$tmp/$model-$layout-$i"
      "$BUILD/shoal" run "examples/fashion-mnist/$model.conf" "${common[@]}" "${extra[@]}" \
        --workspace "$ws" >/dev/null 2>&1 || { echo "bench: $model $layout failed" >&2; exit 1; }
      rate "$ws/metrics.jsonl" >>"$tmp/$model-$layout.runs"
    done
  done
  for layout in in-process separate; do
    median <"$tmp/$model-$layout.runs" >"$tmp/$model-$layout"
    printf "%-5s %-28s %12s   runs: %s\n" $model "$layout" "$(cat "$tmp/$model-$layout")" \
      "$(tr '\n' ' ' <"$tmp/$model-$layout.runs")"
  done
  awk -v a="$(cat "$tmp/$model-in-process")" -v b="$(cat "$tmp/$model-separate")" \
    'BEGIN { if (a > 0 && b > 0) printf "%-5s step time separate / in-process: %.2f (target <= 1.10)\n", "", a / b }' \
    </dev/null | sed "s/^     /$model  /"
done
