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
# The machine may be shared: every run also records how many CPUs other
# processes kept busy meanwhile ("other"), so a slow number can be told
# from a loaded machine.
#
# Usage: bench/run.sh [BUILD_DIR]      (default: build, relative to the repo root)
# Knobs (environment):
#   BENCH_ONLY=torch|shoal      run one side only (default both)
#   BENCH_MODELS="mlp cnn"      BENCH_THREADS="1 2"      BENCH_REPEATS=3
#                               (also: deep, SINGA's 784-2500-...-500-10 STanh MLP)
#   BENCH_MLP_STEPS=500 BENCH_CNN_STEPS=200 BENCH_DEEP_STEPS=100   timed steps per run
#   BENCH_WARMUP_MLP=50 BENCH_WARMUP_CNN=25 BENCH_WARMUP_DEEP=10  untimed steps before them
#   BENCH_WINDOW=25     steps per rate sample (shoal's job.disp_freq); both
#                       sides report the median rate of their windows
#   BENCH_SHOAL_OPTS="-o job.x=y ..."         extra shoal overrides
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1

BUILD=${1:-build}
PY=/usr/bin/python3       # Debian's python3-torch; a pyenv python3 on PATH lacks it
ONLY=${BENCH_ONLY:-}
MODELS=${BENCH_MODELS:-mlp cnn}
THREADS=${BENCH_THREADS:-1 2}
REPEATS=${BENCH_REPEATS:-3}
WINDOW=${BENCH_WINDOW:-25}
SHOAL_OPTS=${BENCH_SHOAL_OPTS:-}
OUT=$BUILD/bench
LOGS=$OUT/logs

steps_of () { case $1 in mlp) echo "${BENCH_MLP_STEPS:-500}" ;; cnn) echo "${BENCH_CNN_STEPS:-200}" ;;
                         deep) echo "${BENCH_DEEP_STEPS:-100}" ;; esac; }
warmup_of () { case $1 in mlp) echo "${BENCH_WARMUP_MLP:-50}" ;; cnn) echo "${BENCH_WARMUP_CNN:-25}" ;;
                          deep) echo "${BENCH_WARMUP_DEEP:-10}" ;; esac; }

die () { echo "bench: $*" >&2; exit 1; }

# "median min max" of the numbers on stdin, or "- - -" for none.
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
[ -x /usr/bin/time ] ||
  echo "bench: /usr/bin/time missing (Debian package time): no RSS for shoal, no load figures" >&2
CORES=$(nproc)
for t in $THREADS; do
  [ "$t" -le "$CORES" ] || echo "bench: warning: $t threads on $CORES cores" >&2
done
HZ=$(getconf CLK_TCK)

# ---- the OpenBLAS bound -------------------------------------------------
SGEMM=$OUT/sgemm_bound
# shellcheck disable=SC2046  # pkg-config prints several flags
"${CC:-cc}" -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE $(pkg-config --cflags openblas) \
  bench/sgemm_bound.c -o "$SGEMM" $(pkg-config --libs openblas) ||
  die "cannot build $SGEMM (libopenblas-dev, pkg-config)"

# ---- running one measurement ----------------------------------------------

# Busy jiffies of all CPUs (user nice system irq softirq).
busy_jiffies () { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

# timed LOG CMD...: runs CMD with its output in LOG and prints
# "RSS_MIB OTHER_CPUS" (either "-" when /usr/bin/time is missing): its peak
# RSS, and the CPUs other processes kept busy on average while it ran.
# Returns CMD's status.
timed () {
  local log=$1 tf b0 b1 rc
  shift
  if [ ! -x /usr/bin/time ]; then
    "$@" >"$log" 2>&1
    rc=$?
    echo "- -"
    return $rc
  fi
  tf=$(mktemp "$OUT/time.XXXXXX")
  b0=$(busy_jiffies)
  /usr/bin/time -f '%U %S %e %M' -o "$tf" "$@" >"$log" 2>&1
  rc=$?
  b1=$(busy_jiffies)
  # The last line: time prints "Command exited with non-zero status" first.
  tail -n 1 "$tf" | awk -v b0="$b0" -v b1="$b1" -v hz="$HZ" '{
      other = $3 > 0 ? ((b1 - b0) / hz - $1 - $2) / $3 : 0
      printf "%.0f %.2f\n", $4 / 1024, other < 0 ? 0 : other }'
  rm -f "$tf"
  return $rc
}

# run_shoal / run_torch print "samples_per_sec rss_mib other_cpus", or
# nothing on failure after saying why on stderr; the full output of every
# run stays in $LOGS.

run_shoal () {  # model threads rep
  local model=$1 t=$2 rep=$3 warm total ws log res sps acc rss other
  warm=$(warmup_of "$model")
  total=$(( warm + $(steps_of "$model") ))
  ws=$(mktemp -d "$OUT/ws.XXXXXX")
  log=$LOGS/shoal-$model-t$t-r$rep.log
  # shoal picks its own BLAS threads from job.threads: no inherited setting.
  # shellcheck disable=SC2086  # SHOAL_OPTS holds several words
  if ! res=$(timed "$log" env -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS \
      "$BUILD/shoal" run "examples/fashion-mnist/$model.conf" \
      -o job.threads="$t" -o job.epochs=0 -o job.train_steps="$total" -o job.test_freq=0 \
      -o job.disp_freq="$WINDOW" -o job.test_steps=20 $SHOAL_OPTS --workspace "$ws"); then
    echo "bench: shoal $model threads=$t failed; end of $log:" >&2
    tail -n 15 "$log" >&2
    rm -rf "$ws"
    return 0
  fi
  # Median of the train windows past the warm-up (all of them if too few).
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
  acc=$(sed -n 's/.*final test accuracy: *\([0-9.]*\).*/\1/p' "$log" | tail -n 1)
  rm -rf "$ws"
  read -r rss other <<<"$res"
  echo "  shoal $model threads=$t run $rep: ${sps:-?} samples/s, rss $rss MiB, other $other CPUs," \
       "test accuracy ${acc:-?} (20 batches)" >&2
  [ -n "$sps" ] && echo "$sps $res"
  return 0
}

run_torch () {  # model threads mode rep
  local model=$1 t=$2 mode=$3 rep=$4 log line res rss other
  log=$LOGS/torch-$model-t$t-$mode-r$rep.log
  if ! res=$(timed "$log" "$PY" bench/torch_train.py --model "$model" --threads "$t" \
      --mode "$mode" --steps "$(steps_of "$model")" --warmup "$(warmup_of "$model")" \
      --window "$WINDOW"); then
    echo "bench: torch $model threads=$t mode=$mode failed; end of $log:" >&2
    tail -n 15 "$log" >&2
    return 0
  fi
  line=$(grep '^samples_per_sec=' "$log" | tail -n 1)
  # Its own getrusage figure: the same ru_maxrss, and there without /usr/bin/time.
  read -r rss other <<<"$res"
  rss=$(field peak_rss_mib "$line")
  echo "  torch $model threads=$t $mode run $rep: $(field samples_per_sec "$line") samples/s," \
       "rss $rss MiB, other $other CPUs" >&2
  echo "$(field samples_per_sec "$line") $rss $other"
}

# Torch thread setups for N threads: N torch threads with passive OpenMP
# and N OpenBLAS threads; and 1 torch thread with N OpenBLAS threads.
torch_modes () { if [ "$1" -gt 1 ]; then echo "omp blas"; else echo "omp"; fi; }
mode_label () {
  case $1 in omp) echo "torch $2 thr + BLAS $2, passive OMP" ;;
             blas) echo "torch 1 thr + BLAS $2" ;; esac
}

# ---- measure ------------------------------------------------------------
declare -A RES   # "side model threads" -> lines "sps rss other"
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
BOUND=$(timed "$LOGS/sgemm_bound.log" "$SGEMM" -t "$(tr ' ' ',' <<<"$THREADS")")
BOUND_OTHER=$(cut -d' ' -f2 <<<"$BOUND")

# ---- report ---------------------------------------------------------------
# column N of the runs of one setup -> "median min max"
col_stats () { grep -v '^$' <<<"${RES[$1]:-}" | cut -d' ' -f"$2" | grep -v -- '^-$' | stats; }
med () { col_stats "$1" "$2" | cut -d' ' -f1; }
# median of the "other" CPUs over the runs of several setups
other_med () {
  local k
  for k in "$@"; do grep -v '^$' <<<"${RES[$k]:-}"; done |
    cut -d' ' -f3 | grep -v -- '^-$' | stats | cut -d' ' -f1
}
# "median [min-max]", or "-" when nothing was measured.
show () { if [ "$1" = - ]; then echo -; else printf '%.0f [%.0f-%.0f]' "$1" "$2" "$3"; fi; }
mib () { if [ "$1" = - ]; then echo -; else printf '%.0f MiB' "$1"; fi; }
# The torch setup with the highest median for model $1 at $2 threads.
best_mode () {
  local best='' b=- m mode
  for mode in $(torch_modes "$2"); do
    m=$(med "torch-$mode $1 $2" 1)
    if [ "$m" != - ] && { [ "$b" = - ] || awk -v a="$m" -v b="$b" 'BEGIN { exit !(a > b) }'; }; then
      best=$mode; b=$m
    fi
  done
  echo "$best"
}
ratio () { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == "" || b == 0) print "-"; else printf "%.2f", a / b }'; }
# Ratios of interleaved pairs: run r of setup $1 over run r of setup $2
# (each rep ran both back to back), as "median [min-max]".
pair_ratio () {
  paste -d' ' <(cut -d' ' -f1 <<<"${RES[$1]:-}") <(cut -d' ' -f1 <<<"${RES[$2]:-}") |
    awk 'NF == 2 && $2 > 0 { print $1 / $2 }' | stats |
    awk '$1 == "-" { print "-"; next } { printf "%.2f [%.2f-%.2f]", $1, $2, $3 }'
}
pct () { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == "" || b == 0) print "-"; else printf "%.0f%%", 100 * a / b }'; }

FMT='%-5s %3s  %-24s %-24s %5s %-18s %9s %9s %5s  %s\n'
echo
echo "samples/s: median of $REPEATS runs [min-max], batch 64, $CORES cores; ratio: of the medians;"
echo "pairs: shoal / torch of each interleaved pair, median [min-max];"
echo "other: CPUs kept busy by other processes during the runs (median; 0 = quiet machine)"
# shellcheck disable=SC2059
printf "$FMT" model thr "shoal samples/s" "torch samples/s" ratio "pairs" "shoal RSS" "torch RSS" other \
  "best torch setup"
for model in $MODELS; do
  for t in $THREADS; do
    best=$(best_mode "$model" "$t")
    s=$(med "shoal $model $t" 1)
    b=-; [ -n "$best" ] && b=$(med "torch-$best $model $t" 1)
    # shellcheck disable=SC2046,SC2059
    printf "$FMT" "$model" "$t" "$(show $(col_stats "shoal $model $t" 1))" \
      "$(show $(col_stats "torch-${best:-none} $model $t" 1))" "$(ratio "$s" "$b")" \
      "$(pair_ratio "shoal $model $t" "torch-${best:-none} $model $t")" \
      "$(mib "$(med "shoal $model $t" 2)")" "$(mib "$(med "torch-${best:-none} $model $t" 2)")" \
      "$(other_med "shoal $model $t" "torch-${best:-none} $model $t")" \
      "${best:+$(mode_label "$best" "$t")}"
    for mode in $(torch_modes "$t"); do
      [ "$mode" = "$best" ] && continue
      # shellcheck disable=SC2046,SC2059
      printf "$FMT" "" "" "" "$(show $(col_stats "torch-$mode $model $t" 1))" "" "" "" \
        "$(mib "$(med "torch-$mode $model $t" 2)")" "$(other_med "torch-$mode $model $t")" \
        "(other setup: $(mode_label "$mode" "$t"))"
    done
  done
done

echo
echo "OpenBLAS bound for the MLP: the sgemm calls of one step alone (bench/sgemm_bound.c;" \
     "other $BOUND_OTHER CPUs):"
grep '^sgemm_bound' "$LOGS/sgemm_bound.log"
if grep -qw mlp <<<"$MODELS"; then
  for t in $THREADS; do
    bnd=$(grep "^sgemm_bound threads=$t " "$LOGS/sgemm_bound.log" | tr ' ' '\n' |
          sed -n 's/^samples_per_sec=//p')
    best=$(best_mode mlp "$t")
    echo "mlp threads=$t: bound ${bnd:--} samples/s; shoal reaches" \
         "$(pct "$(med "shoal mlp $t" 1)" "${bnd:--}"), torch $(pct "$(med "torch-${best:-none} mlp $t" 1)" "${bnd:--}")"
  done
fi
echo
busy=$(other_med "${!RES[@]}")
if awk -v o="$busy" 'BEGIN { exit !(o != "-" && o > 0.3) }'; then
  echo "bench: warning: other processes kept $busy CPUs busy (median over all runs);" \
       "these numbers do not show an idle machine: re-run when it is quiet"
fi
echo "bench: done in $(( SECONDS - START )) s"
exit $failed
