#!/usr/bin/env bash
# Sandblaster's cost of servers in another process: samples/s of one
# worker whose server is in the same process (direct calls, params read
# in place) against one worker with its server in a second process on
# this host, its slices moving through shared memory ([cluster]
# shared_memory = auto, the default: the calls stay Thrift, the bytes
# stay in place) and, for comparison, over the loopback socket
# (shared_memory = off).  The layouts take turns run by run, so that load
# from outside hits them alike.  Prints each layout's median samples/s
# with the runs' range, the step-time ratio separate / in-process of the
# medians and the median [min-max] of that ratio over the interleaved
# pairs (target <= 1.10), and the machine's load ("other": CPUs that other
# processes kept busy during the runs, from /proc/stat).
#   bench/sandblaster.sh [BUILD_DIR]
#   knobs: BENCH_SB_REPEATS=5 BENCH_SB_STEPS_MLP=400 BENCH_SB_STEPS_CNN=150 BENCH_SB_MODELS="mlp cnn"
#          BENCH_SB_LAYOUTS="in-process shm socket"
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
REPEATS=${BENCH_SB_REPEATS:-5}
MODELS=${BENCH_SB_MODELS:-mlp cnn}
LAYOUTS=${BENCH_SB_LAYOUTS:-in-process shm socket}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=bench/lib.sh
. bench/lib.sh

printf "%-5s %-12s %10s  %-22s %-6s %s\n" model layout samples/s "range" "ratio" "step time / in-process, pairs: median [min-max]"
for model in $MODELS; do
  steps=$([ "$model" = mlp ] && echo "${BENCH_SB_STEPS_MLP:-400}" || echo "${BENCH_SB_STEPS_CNN:-150}")
  common=(-o job.epochs=0 -o "job.train_steps=$steps" -o job.test_freq=0 -o job.test_steps=1
          -o job.disp_freq=25 -q)
  : >"$tmp/other"
  for i in $(seq "$REPEATS"); do
    for layout in $LAYOUTS; do
      extra=()
      case $layout in
        shm) extra=(-o cluster.server_worker_separate=true -o cluster.shared_memory=auto) ;;
        socket) extra=(-o cluster.server_worker_separate=true -o cluster.shared_memory=off) ;;
      esac
      ws="$tmp/$model-$layout-$i"
      other_cpus "$BUILD/shoal" run "examples/fashion-mnist/$model.conf" "${common[@]}" "${extra[@]}" \
        --workspace "$ws" >>"$tmp/other" || { echo "bench: $model $layout failed" >&2; exit 1; }
      rate "$ws/metrics.jsonl" >>"$tmp/$model-$layout.runs"
    done
  done
  base=$(median <"$tmp/$model-in-process.runs")
  for layout in $LAYOUTS; do
    med=$(median <"$tmp/$model-$layout.runs")
    range=$(sort -g "$tmp/$model-$layout.runs" | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "[%.0f-%.0f]", lo, hi }')
    ratio=$(awk -v a="$base" -v b="$med" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "-" }')
    # step time / in-process over each interleaved pair (run i of both)
    pairs=$(paste -d' ' "$tmp/$model-in-process.runs" "$tmp/$model-$layout.runs" | awk '$2 > 0 { print $1 / $2 }' |
            sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                                                  printf "%.2f [%.2f-%.2f]", m, v[1], v[NR] }')
    printf "%-5s %-12s %10.0f  %-22s %-6s %s\n" "$model" "$layout" "$med" "$range" "$ratio" "$pairs"
  done
  echo "$model: other CPUs busy during the runs (median): $(median <"$tmp/other")  (target: separate / in-process <= 1.10)"
done
