#!/usr/bin/env bash
# The cost of spreading a partitioned group over processes: samples/s of
# the hybrid LeNet (examples/fashion-mnist/hybrid.conf: conv/pool split by
# batch, dense layers by feature, k = 2) with both workers in one process
# (threads, bridges are pointer hand-offs) against one worker per process
# (bridges, the follower's values and gradients over Thrift on loopback),
# servers beside the workers (conf/allreduce.conf) and apart (Sandblaster
# with nworkers_per_procs = 1).  Prints the step-time ratios.
#   bench/spread.sh [BUILD_DIR]     knobs: BENCH_SPREAD_REPEATS=3 BENCH_SPREAD_STEPS=150
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
REPEATS=${BENCH_SPREAD_REPEATS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=bench/lib.sh
. bench/lib.sh

common=(-o job.epochs=0 -o "job.train_steps=${BENCH_SPREAD_STEPS:-150}" -o job.test_freq=0
        -o job.test_steps=1 -o job.disp_freq=25 -q)
layouts=(one-process spread-allreduce spread-apart)
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) (other processes share these cores)"
printf "%-18s %12s\n" layout samples/s
# interleaved, so that load from outside hits every layout alike
for i in $(seq "$REPEATS"); do
  for layout in "${layouts[@]}"; do
    case $layout in
      one-process) extra=() ;;
      spread-allreduce) extra=(--topology conf/allreduce.conf) ;;
      spread-apart) extra=(-o cluster.nworkers_per_procs=1 -o cluster.server_worker_separate=true) ;;
    esac
    ws="$tmp/$layout-$i"
    "$BUILD/shoal" run examples/fashion-mnist/hybrid.conf "${common[@]}" "${extra[@]}" \
      --workspace "$ws" >/dev/null 2>&1 || { echo "bench: $layout failed" >&2; exit 1; }
    rate "$ws/metrics.jsonl" >>"$tmp/$layout.runs"
  done
done
for layout in "${layouts[@]}"; do
  median <"$tmp/$layout.runs" >"$tmp/$layout"
  printf "%-18s %12s   runs: %s\n" "$layout" "$(cat "$tmp/$layout")" "$(tr '\n' ' ' <"$tmp/$layout.runs")"
done
for layout in spread-allreduce spread-apart; do
  awk -v a="$(cat "$tmp/one-process")" -v b="$(cat "$tmp/$layout")" -v l="$layout" \
    'BEGIN { if (a > 0 && b > 0) printf "step time %s / one process: %.2f\n", l, a / b }' </dev/null
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
