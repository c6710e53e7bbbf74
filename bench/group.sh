#!/usr/bin/env bash
# A worker group in one process against one worker with the same cores:
# samples/s of `shoal run` (forward, backward, update, data) for the MLP
# and the CNN, batch 64 either way:
#   1x2        one worker, job.threads = 2 (2 BLAS threads)
#   2x1 batch  a group of 2 workers, job.threads = 2 (1 BLAS thread each),
#              every layer split by batch (partition_dim 0)
#   2x1 auto   the same group, partition_dim = auto named (dense layers
#              whose weights outweigh their inputs by feature)
#   2x1 default  the same group with partition_dim left out: what a conf
#              that says nothing gets (auto; it must read as 2x1 auto)
#   2x1 default t=0 / t=4   the default group with job.threads unset and 4
#              (on a 2-core machine 4 is clamped to 2, with a warning):
#              every job.threads setting should run as fast as the best
# Setups take turns run by run (interleaved); prints per setup the median
# samples/s, the range, and the median [min-max] of its ratio to 1x2 over
# the interleaved pairs (targets: 2x1 >= 0.95 of 1x2 on the MLP, >= 1.0
# on the CNN; every threads setting within 5 % of the best), and the
# machine's load (other CPUs busy).
#   bench/group.sh [BUILD_DIR]
#   knobs: BENCH_GROUP_REPEATS=5 BENCH_GROUP_MODELS="mlp cnn" BENCH_GROUP_STEPS_MLP=400
#          BENCH_GROUP_STEPS_CNN=150 BENCH_GROUP_SETUPS="2x1-batch 2x1-default"
#          (the setups beside 1x2, which always runs: default all of them)
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
REPEATS=${BENCH_GROUP_REPEATS:-5}
MODELS=${BENCH_GROUP_MODELS:-mlp cnn}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=bench/lib.sh
. bench/lib.sh

ALL_SETUPS="2x1-batch 2x1-auto 2x1-default 2x1-default-t0 2x1-default-t4"
read -r -a SETUPS <<<"1x2 ${BENCH_GROUP_SETUPS:-$ALL_SETUPS}"
for s in "${SETUPS[@]}"; do
  [[ " 1x2 $ALL_SETUPS " == *" $s "* ]] || { echo "bench/group: unknown setup '$s' (known: 1x2 $ALL_SETUPS)" >&2; exit 2; }
done
opts_of () {
  local g=(-o cluster.nworkers_per_group=2 -o cluster.nworkers_per_procs=2)
  case $1 in
    1x2) echo "-o job.threads=2" ;;
    2x1-batch) echo "${g[*]} -o job.threads=2 -o cluster.partition_dim=0" ;;
    2x1-auto) echo "${g[*]} -o job.threads=2 -o cluster.partition_dim=auto" ;;
    2x1-default) echo "${g[*]} -o job.threads=2" ;;
    2x1-default-t0) echo "${g[*]}" ;;
    2x1-default-t4) echo "${g[*]} -o job.threads=4" ;;
  esac
}

printf "%-5s %-15s %10s  %-16s %-20s %s\n" model setup samples/s range "vs 1x2 (pairs)" other
for model in $MODELS; do
  steps=$([ "$model" = mlp ] && echo "${BENCH_GROUP_STEPS_MLP:-400}" || echo "${BENCH_GROUP_STEPS_CNN:-150}")
  for i in $(seq "$REPEATS"); do
    for s in "${SETUPS[@]}"; do
      ws="$tmp/$model-$s-$i"
      # shellcheck disable=SC2046  # opts_of prints several words
      other_cpus env -u OPENBLAS_NUM_THREADS "$BUILD/shoal" run "examples/fashion-mnist/$model.conf" \
        -o job.epochs=0 -o "job.train_steps=$steps" -o job.test_freq=0 -o job.test_steps=1 \
        -o job.disp_freq=25 -q $(opts_of "$s") --workspace "$ws" >>"$tmp/$model-$s.other" \
        || { echo "bench: $model $s failed" >&2; exit 1; }
      rate "$ws/metrics.jsonl" >>"$tmp/$model-$s.runs"
    done
  done
  for s in "${SETUPS[@]}"; do
    med=$(median <"$tmp/$model-$s.runs")
    range=$(sort -g "$tmp/$model-$s.runs" | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "[%.0f-%.0f]", lo, hi }')
    pairs=$(paste -d' ' "$tmp/$model-$s.runs" "$tmp/$model-1x2.runs" | awk '$2 > 0 { print $1 / $2 }' |
            sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                                                  printf "%.2f [%.2f-%.2f]", m, v[1], v[NR] }')
    printf "%-5s %-15s %10.0f  %-16s %-20s %s\n" "$model" "$s" "$med" "$range" "$pairs" \
      "$(median <"$tmp/$model-$s.other")"
  done
done
