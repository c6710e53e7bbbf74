#!/usr/bin/env bash
# shoal against PyTorch on the same models, data, batch and cores.
#
# `make bench` calls this after building shoal and importing Fashion-MNIST.
# For each model (mlp, cnn) and thread count (1, 2) it runs shoal and the
# PyTorch baseline BENCH_REPEATS times, interleaved so that load from other
# processes hits both sides alike, and prints medians: samples/s, the ratio
# shoal/torch and peak RSS.  PyTorch runs in every thread setup that can
# win on this machine (bench/README.md); the table shows the best one.
# Last, the OpenBLAS bound for the MLP (bench/sgemm_bound.c) and the
# fraction of it each side reaches.
#
# Usage: bench/run.sh [BUILD_DIR]           (default: build)
# Knobs (environment):
#   BENCH_ONLY=torch|shoal      run one side only (default both)
#   BENCH_MODELS="mlp cnn"      BENCH_THREADS="1 2"      BENCH_REPEATS=3
#   BENCH_MLP_STEPS=500 BENCH_CNN_STEPS=200   timed steps per run
#   BENCH_WARMUP_MLP=50 BENCH_WARMUP_CNN=25   untimed steps before them
#   BENCH_WINDOW=25     steps per rate sample (shoal's job.disp_freq); both
#                       sides report the median rate of the windows
#   BENCH_SHOAL_OPTS="-o job.x=y ..."         extra shoal overrides
set -u -o pipefail

BUILD=${1:-build}
PY=/usr/bin/python3       # Debian's python3-torch; a pyenv python3 on PATH lacks it
ONLY=${BENCH_ONLY:-}
MODELS=${BENCH_MODELS:-mlp cnn}
THREADS=${BENCH_THREADS:-1 2}
REPEATS=${BENCH_REPEATS:-3}
SHOAL_OPTS=${BENCH_SHOAL_OPTS:-}
OUT=$BUILD/bench
LOGS=$OUT/logs

steps_of () { case $1 in mlp) echo "${BENCH_MLP_STEPS:-500}" ;; cnn) echo "${BENCH_CNN_STEPS:-200}" ;; esac; }
warmup_of () { case $1 in mlp) echo "${BENCH_WARMUP_MLP:-50}" ;; cnn) echo "${BENCH_WARMUP_CNN:-25}" ;; esac; }
WINDOW=${BENCH_WINDOW:-25}

die () { echo "bench: $*" >&2; exit 1; }

# Median (and min-max) of numbers on stdin: "median min max", or "- - -".
stats () {
  sort -g | awk '{ v[NR] = $1 }
    END { if (NR == 0) { print "- - -"; exit }
          m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          printf "%.1f %.1f %.1f\n", m, v[1], v[NR] }'
}

# key=value field of a line.
field () { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p" | head -n 1; }

mkdir -p "$OUT" "$LOGS" || die "cannot create $OUT"
START=$SECONDS

# ---- checks -----------------------------------------------------------
[ -x "$PY" ] || die "$PY not found: install python3-torch and python3-numpy (make bench does)"
if [ "$ONLY" != shoal ]; then
  "$PY" -c 'import torch, numpy' 2>/dev/null || die "$PY cannot import torch and numpy"
fi
if [ "$ONLY" != torch ]; then
  [ -x "$BUILD/shoal" ] || die "$BUILD/shoal not built (run make bench, or BENCH_ONLY=torch)"
  [ -e "$BUILD/data/fashion-mnist/.done" ] ||
    die "$BUILD/data/fashion-mnist not imported (make data)"
  for m in $MODELS; do
    [ -f "examples/fashion-mnist/$m.conf" ] || die "examples/fashion-mnist/$m.conf missing"
  done
fi
TIME=
if [ -x /usr/bin/time ]; then
  TIME=/usr/bin/time
else
  echo "bench: /usr/bin/time missing (Debian package time): shoal's peak RSS not measured" >&2
fi
CORES=$(nproc)
for t in $THREADS; do
  [ "$t" -le "$CORES" ] || echo "bench: warning: $t threads on $CORES cores" >&2
done

# ---- the OpenBLAS bound -------------------------------------------------
SGEMM=$OUT/sgemm_bound
# shellcheck disable=SC2046  # pkg-config prints several flags
cc -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE $(pkg-config --cflags openblas) \
  bench/sgemm_bound.c -o "$SGEMM" $(pkg-config --libs openblas) ||
  die "cannot build $SGEMM (libopenblas-dev, pkg-config)"

# ---- one run of each side -------------------------------------------------
# Each prints "samples_per_sec rss_mib" (or nothing on failure, after
# telling why on stderr); the full output stays in $LOGS.

run_shoal () {  # model threads rep
  local model=$1 t=$2 rep=$3 warm total ws log rss sps acc
  warm=$(warmup_of "$model")
  total=$(( warm + $(steps_of "$model") ))
  ws=$(mktemp -d "$OUT/ws.XXXXXX")
  log=$LOGS/shoal-$model-t$t-r$rep.log
  # shoal picks its own BLAS threads from job.threads: no inherited setting.
    # shellcheck disable=SC2086  # SHOAL_OPTS holds several words
  if ! env -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS \
      ${TIME:+$TIME -v -o "$ws.time"} "$BUILD/shoal" run "examples/fashion-mnist/$model.conf" \
      -o job.threads="$t" -o job.train_steps="$total" -o job.test_freq=0 \
      -o job.disp_freq="$WINDOW" -o job.test_steps=20 $SHOAL_OPTS \
      --workspace "$ws" >"$log" 2>&1; then
    echo "bench: shoal $model threads=$t failed; end of $log:" >&2
    tail -n 15 "$log" >&2
    rm -rf "$ws" "$ws.time"
    return 0
  fi
  # Median of the train lines past the warm-up (all of them if too few).
  sps=$("$PY" - "$ws/metrics.jsonl" "$warm" <<'EOF'
import json, statistics, sys
path, warm = sys.argv[1], int(sys.argv[2])
try:
    rows = [json.loads(l) for l in open(path) if l.strip()]
except (OSError, ValueError) as e:
    sys.exit(f"bench: {path}: {e}")
train = [r for r in rows if r.get("phase") == "train" and "samples_per_sec" in r]
late = [r for r in train if r.get("step", 0) > warm]
use = late if len(late) >= 3 else train
if not use:
    sys.exit(f"bench: {path}: no train lines with samples_per_sec")
if use is train:
    print(f"bench: {path}: only {len(late)} train lines after step {warm}, using all",
          file=sys.stderr)
print(f"{statistics.median(r['samples_per_sec'] for r in use):.1f}")
EOF
  )
  rss=-
  [ -f "$ws.time" ] &&
    rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$ws.time")
  acc=$(sed -n 's/.*final test accuracy: *\([0-9.]*\).*/\1/p' "$log" | tail -n 1)
  echo "  shoal $model threads=$t run $rep: ${sps:-?} samples/s, rss ${rss} MiB, acc ${acc:-?}" >&2
  rm -rf "$ws" "$ws.time"
  [ -n "$sps" ] && echo "$sps $rss"
  return 0
}

run_torch () {  # model threads mode rep
  local model=$1 t=$2 mode=$3 rep=$4 log line
  log=$LOGS/torch-$model-t$t-$mode-r$rep.log
  if ! "$PY" bench/torch_train.py --model "$model" --threads "$t" --mode "$mode" \
      --steps "$(steps_of "$model")" --warmup "$(warmup_of "$model")" --window "$WINDOW" \
      >"$log" 2>&1; then
    echo "bench: torch $model threads=$t mode=$mode failed; end of $log:" >&2
    tail -n 15 "$log" >&2
    return 0
  fi
  line=$(grep '^samples_per_sec=' "$log" | tail -n 1)
  echo "  torch $model threads=$t $mode run $rep: $(field samples_per_sec "$line") samples/s," \
       "rss $(field peak_rss_mib "$line") MiB" >&2
  echo "$(field samples_per_sec "$line") $(field peak_rss_mib "$line")"
}

# Torch thread setups for N threads: N torch threads with passive OpenMP
# and N OpenBLAS threads; and 1 torch thread with N OpenBLAS threads.
torch_modes () { if [ "$1" -gt 1 ]; then echo "omp blas"; else echo "omp"; fi; }
mode_label () {
  case $1 in omp) echo "torch $2 thr + BLAS $2, passive OMP" ;;
             blas) echo "torch 1 thr + BLAS $2" ;; esac
}

# ---- measure ------------------------------------------------------------
declare -A RES   # "side model t" -> lines "sps rss"
failed=0
echo "bench: $REPEATS runs per setup, interleaved; logs in $LOGS" >&2
for model in $MODELS; do
  for t in $THREADS; do
    for rep in $(seq 1 "$REPEATS"); do
      if [ "$ONLY" != torch ]; then
        r=$(run_shoal "$model" "$t" "$rep"); [ -n "$r" ] || failed=1
        RES["shoal $model $t"]+="$r"$'\n'
      fi
      if [ "$ONLY" != shoal ]; then
        for mode in $(torch_modes "$t"); do
          r=$(run_torch "$model" "$t" "$mode" "$rep"); [ -n "$r" ] || failed=1
          RES["torch-$mode $model $t"]+="$r"$'\n'
        done
      fi
    done
  done
done
echo "bench: measuring the OpenBLAS bound" >&2
BOUND=$("$SGEMM" -t "$(tr ' ' ',' <<<"$THREADS")")
echo "$BOUND" >"$LOGS/sgemm_bound.log"

# ---- report ---------------------------------------------------------------
sps_stats () { grep -v '^$' <<<"${RES[$1]:-}" | cut -d' ' -f1 | stats; }
rss_med () {
  grep -v '^$' <<<"${RES[$1]:-}" | cut -d' ' -f2 | grep -v -- - | stats |
    awk '$1 == "-" { print "-"; next } { printf "%.0f MiB\n", $1 }'
}
# "median [min-max]", or "-" when nothing was measured.
show () { if [ "$1" = - ]; then echo -; else echo "$1 [$2-$3]"; fi; }
bound_of () { grep "^sgemm_bound threads=$1 " <<<"$BOUND" | tr ' ' '\n' | sed -n 's/^samples_per_sec=//p'; }
pct () { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "" || b == "-" || b == 0) print "-"; else printf "%.0f%%", 100 * a / b }'; }

echo
echo "samples/s: median of $REPEATS runs [min-max]; batch 64; $CORES cores"
printf '%-5s %3s  %-22s %-24s %6s %9s %9s  %s\n' model thr "shoal samples/s" "torch samples/s" \
  ratio "shoal RSS" "torch RSS" "best torch setup"
for model in $MODELS; do
  for t in $THREADS; do
    read -r s_med s_min s_max < <(sps_stats "shoal $model $t")
    best=; b_med=-; b_min=-; b_max=-
    for mode in $(torch_modes "$t"); do
      read -r m mn mx < <(sps_stats "torch-$mode $model $t")
      if [ "$m" != - ] && { [ "$b_med" = - ] || awk -v a="$m" -v b="$b_med" 'BEGIN { exit !(a > b) }'; }; then
        best=$mode; b_med=$m; b_min=$mn; b_max=$mx
      fi
    done
    ratio=$(awk -v a="$s_med" -v b="$b_med" 'BEGIN { if (a == "-" || b == "-") print "-"; else printf "%.2f", a / b }')
    printf '%-5s %3s  %-22s %-24s %6s %9s %9s  %s\n' "$model" "$t" \
      "$(show "$s_med" "$s_min" "$s_max")" "$(show "$b_med" "$b_min" "$b_max")" "$ratio" \
      "$(rss_med "shoal $model $t")" "$(rss_med "torch-${best:-none} $model $t")" \
      "${best:+$(mode_label "$best" "$t")}"
    for mode in $(torch_modes "$t"); do
      [ "$mode" = "$best" ] && continue
      read -r m mn mx < <(sps_stats "torch-$mode $model $t")
      printf '%-5s %3s  %-22s %-24s %6s %9s %9s  %s\n' "" "" "" "$(show "$m" "$mn" "$mx")" "" "" "" \
        "(other: $(mode_label "$mode" "$t"))"
    done
  done
done

echo
echo "OpenBLAS bound for the MLP (sgemm of one step only, bench/sgemm_bound.c):"
grep '^sgemm_bound' <<<"$BOUND"
if grep -qw mlp <<<"$MODELS"; then
  for t in $THREADS; do
    b=$(bound_of "$t")
    s=$(sps_stats "shoal mlp $t" | cut -d' ' -f1)
    tb=-
    for mode in $(torch_modes "$t"); do
      m=$(sps_stats "torch-$mode mlp $t" | cut -d' ' -f1)
      [ "$m" != - ] && { [ "$tb" = - ] || awk -v a="$m" -v b="$tb" 'BEGIN { exit !(a > b) }'; } && tb=$m
    done
    echo "mlp threads=$t: bound $b samples/s; shoal reaches $(pct "$s" "$b"), torch $(pct "$tb" "$b")"
  done
fi
echo
echo "bench: done in $(( SECONDS - START )) s"
exit $failed
