#!/usr/bin/env bash
# An RBM on Fashion-MNIST against scikit-learn's BernoulliRBM
# (bench/rbm_sklearn.py): the same hidden units, learning rate, batch size
# and epochs, plain SGD on both sides (no momentum or weight decay), the
# same threads.  shoal trains examples/dbn/rbm1.conf (CD-1, visible
# probabilities) with those values; scikit-learn trains PCD-1 (its only
# algorithm).  Both report the reconstruction error on the 10,000 test
# images, defined alike (rbm_hidden's loss; rbm_sklearn.py computes it
# from the learned weights), and the time per epoch; runs alternate,
# BENCH_REPEATS times, medians printed.
#
# Usage: bench/rbm.sh [BUILD]
# Knobs: BENCH_RBM_HIDDEN=256 BENCH_RBM_LR=0.1 BENCH_RBM_BATCH=100 BENCH_RBM_EPOCHS=3
#        BENCH_REPEATS=3 BENCH_THREADS=2
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
PY=/usr/bin/python3
H=${BENCH_RBM_HIDDEN:-256}
LR=${BENCH_RBM_LR:-0.1}
B=${BENCH_RBM_BATCH:-100}
E=${BENCH_RBM_EPOCHS:-3}
REPEATS=${BENCH_REPEATS:-3}
THREADS=${BENCH_THREADS:-2}
OUT=$BUILD/bench/rbm
mkdir -p "$OUT"
source bench/lib.sh

die () { echo "bench/rbm: $*" >&2; exit 1; }
"$PY" -c 'import sklearn' 2>/dev/null || die "$PY cannot import sklearn (make bench installs python3-sklearn)"
[ -x "$BUILD/shoal" ] || die "$BUILD/shoal not built"
[ -e "$BUILD/data/fashion-mnist/.done" ] || die "$BUILD/data/fashion-mnist not imported (make data)"
field () { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p" | head -n 1; }

s_time=() t_time=() s_err= t_err=
for r in $(seq "$REPEATS"); do
  ws=$OUT/ws
  rm -rf "$ws"
  start=$(date +%s%N)
  "$BUILD/shoal" run examples/dbn/rbm1.conf -q -o "job.epochs=$E" -o job.test_freq=0 -o job.test_steps=0 \
    -o job.disp_freq=100 -o "layer h1.num_output=$H" -o "layer data.batch_size=$B" -o "updater.lr=$LR" \
    -o updater.momentum=0 -o updater.weight_decay=0 -o "job.threads=$THREADS" -o job.checkpoint_freq=0 \
    --workspace "$ws" >/dev/null 2>&1 || die "shoal run failed"
  # training time: the train windows' samples over their rates (start-up and test excluded)
  s_time+=("$("$PY" - "$ws/metrics.jsonl" "$B" "$E" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
steps = [x["step"] for x in r]
# each line: the steps since the last line, at samples_per_sec
secs = sum((s - p) * int(sys.argv[2]) / x["samples_per_sec"] for s, p, x in zip(steps, [0] + steps[:-1], r))
print(f"{secs / float(sys.argv[3]):.3f}")
PY
)")
  s_err=$(grep '"phase":"test"' "$ws/metrics.jsonl" | tail -1 | sed 's/.*"loss":\([^,}]*\).*/\1/')
  line=$("$PY" bench/rbm_sklearn.py --hidden "$H" --lr "$LR" --batch "$B" --epochs "$E" --threads "$THREADS") \
    || die "scikit-learn run failed"
  t_time+=("$(field sec_per_epoch "$line")")
  t_err=$(field recon_error "$line")
done
s=$(printf '%s\n' "${s_time[@]}" | median)
t=$(printf '%s\n' "${t_time[@]}" | median)
printf '%-12s %-26s %-26s %s\n' "" "shoal (CD-1)" "scikit-learn (PCD-1)" "shoal/sklearn"
printf '%-12s %-26s %-26s %s\n' "s/epoch" "$s [${s_time[*]}]" "$t [${t_time[*]}]" \
  "$(awk -v a="$s" -v b="$t" 'BEGIN { printf "%.2f", a / b }')"
printf '%-12s %-26s %-26s %s\n' "test error" "$s_err" "$t_err" "$(awk -v a="$s_err" -v b="$t_err" 'BEGIN { printf "%.2f", a / b }')"
echo "($H hidden, lr $LR, batch $B, $E epochs, $THREADS threads; error: squared, summed over pixels, mean over images)"
