#!/usr/bin/env bash
# How steady a run is: the same short training run of SINGA's deep MLP
# (examples/fashion-mnist/deep.conf, 784-2500-2000-1500-1000-500-10 STanh,
# batch 64, 2 cores) many times, interleaved with PyTorch's best 2-core
# setup (1 torch thread, 2 OpenBLAS threads), and shoal with OpenBLAS's
# own idle spin (OPENBLAS_THREAD_TIMEOUT=28: its threads call sched_yield
# for ~0.1 s after every product) beside shoal's default (2^18 cycles).
# Per setup: samples/s median [min-max] and the spread (max-min)/median,
# CPU seconds per 1000 samples (user+sys; spinning shows here), and the
# context switches (voluntary / involuntary) per step; then the ratio of
# each interleaved pair.  The machine's load ("other") is printed too: on
# a shared machine the spread is mostly the neighbours'.
#   bench/steadiness.sh [BUILD_DIR]
#   knobs: BENCH_STEADY_REPEATS=7 BENCH_STEADY_STEPS=60 BENCH_STEADY_MODEL=deep (or mlp)
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
REPEATS=${BENCH_STEADY_REPEATS:-7}
STEPS=${BENCH_STEADY_STEPS:-60}
MODEL=${BENCH_STEADY_MODEL:-deep}
WARM=10
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=bench/lib.sh
. bench/lib.sh

# runs CMD, appends "samples/s cpu_s vol invol other" to FILE
measure () {
  local file=$1 kind=$2
  shift 2
  local tf b0 b1 hz sps
  hz=$(getconf CLK_TCK)
  tf=$(mktemp)
  b0=$(busy_jiffies)
  /usr/bin/time -f '%U %S %e %w %c' -o "$tf" "$@" >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; return 1; }
  b1=$(busy_jiffies)
  if [ "$kind" = shoal ]; then
    sps=$(rate "$tmp/ws/metrics.jsonl")
    rm -rf "$tmp/ws"
  else
    sps=$(sed -n 's/^samples_per_sec=\([0-9.]*\).*/\1/p' "$tmp/out" | tail -1)
  fi
  tail -n 1 "$tf" | awk -v s="$sps" -v b0="$b0" -v b1="$b1" -v hz="$hz" '{
      other = $3 > 0 ? ((b1 - b0) / hz - $1 - $2) / $3 : 0
      printf "%s %.2f %d %d %.2f\n", s, $1 + $2, $4, $5, other < 0 ? 0 : other }' >>"$file"
  rm -f "$tf"
}

shoal_run () {  # file [env ...]
  local file=$1
  shift
  measure "$file" shoal env -u OPENBLAS_NUM_THREADS "$@" "$BUILD/shoal" run "examples/fashion-mnist/$MODEL.conf" \
    -o job.epochs=0 -o "job.train_steps=$((STEPS + WARM))" -o job.test_freq=0 -o job.test_steps=1 \
    -o job.disp_freq=10 -o job.threads=2 -q --workspace "$tmp/ws"
}

for i in $(seq "$REPEATS"); do
  shoal_run "$tmp/shoal" || exit 1
  measure "$tmp/torch" torch "$PY" bench/torch_train.py --model "$MODEL" --threads 2 --mode blas \
    --steps "$STEPS" --warmup "$WARM" --window 10 || exit 1
  shoal_run "$tmp/shoal-spin28" OPENBLAS_THREAD_TIMEOUT=28 || exit 1
done

samples=$(( (STEPS + WARM) * 64 ))
printf "%-22s %-22s %8s %12s %14s %6s\n" setup "samples/s" spread "CPU s/1k smp" "ctx/step v/i" other
for s in shoal torch shoal-spin28; do
  "$PY" - "$tmp/$s" "$s" "$samples" "$((STEPS + WARM))" <<'PY'
import statistics, sys
path, name, smp, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = [list(map(float, l.split())) for l in open(path) if l.strip()]
sps = [r[0] for r in rows]
m = statistics.median(sps)
cpu = sum(r[1] for r in rows) / len(rows)
vol = sum(r[2] for r in rows) / len(rows) / steps
inv = sum(r[3] for r in rows) / len(rows) / steps
other = statistics.median(r[4] for r in rows)
print(f"{name:22s} {m:6.0f} [{min(sps):6.0f}-{max(sps):6.0f}] {100 * (max(sps) - min(sps)) / m:7.0f}% "
      f"{1000 * cpu / smp:12.2f} {vol:9.1f}/{inv:<4.1f} {other:6.2f}")
PY
done
for s in shoal shoal-spin28; do
  echo "$s / torch, interleaved pairs: $(paste -d' ' <(cut -d' ' -f1 "$tmp/$s") <(cut -d' ' -f1 "$tmp/torch") |
    awk '$2 > 0 { print $1 / $2 }' | sort -g |
    awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                             printf "%.2f [%.2f-%.2f]", m, v[1], v[NR] }')"
done
