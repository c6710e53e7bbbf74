#!/usr/bin/env bash
# The char-RNN (examples/char-rnn/char_rnn.conf) against PyTorch
# (bench/rnn_torch.py): the same model - embedding, a stacked GRU or LSTM,
# a linear layer over every step, softmax cross-entropy, Adam with
# clip_norm - on the same bytes cut the same way (Python's standard
# library, sequences of 100, 32 streams), with the same threads.
#
# For each cell it runs shoal and torch BENCH_REPEATS times in turn (A B
# A B: load from other processes hits both alike) and prints the median
# samples/s (sequences of 100 bytes per second over windows of
# BENCH_WINDOW steps after a warm-up) and the ratio shoal/torch.  Then
# quality: both train BENCH_QUALITY_STEPS steps from the same initial
# weights (torch takes shoal's, written by bench/params_blob.c) and report
# the mean validation loss per byte on the whole validation split, with
# their ratio (one run each: the losses do not depend on the machine; the
# dropout masks differ).
#
# Usage: bench/rnn.sh [BUILD]
# Knobs: BENCH_CELLS="gru lstm" BENCH_REPEATS=3 BENCH_RNN_STEPS=60
#        BENCH_WARMUP=10 BENCH_WINDOW=10 BENCH_THREADS=2 BENCH_QUALITY_STEPS=300
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
PY=/usr/bin/python3
CELLS=${BENCH_CELLS:-gru lstm}
REPEATS=${BENCH_REPEATS:-3}
STEPS=${BENCH_RNN_STEPS:-60}
WARMUP=${BENCH_WARMUP:-10}
WINDOW=${BENCH_WINDOW:-10}
THREADS=${BENCH_THREADS:-2}
QUALITY=${BENCH_QUALITY_STEPS:-300}
OUT=$BUILD/bench/rnn
mkdir -p "$OUT"
source bench/lib.sh

die () { echo "bench/rnn: $*" >&2; exit 1; }
"$PY" -c 'import torch' 2>/dev/null || die "$PY cannot import torch (make bench installs python3-torch)"
[ -x "$BUILD/shoal" ] || die "$BUILD/shoal not built"

files=$(ls /usr/lib/python3.11/*.py | LC_ALL=C sort)
data=$OUT/pytext
if [ ! -e "$data/vocab.ini" ]; then
  # shellcheck disable=SC2086
  "$BUILD/shoal" import text --out "$data" --seq-len 100 --force $files >/dev/null || die "import failed"
fi
vocab=$(sed -n 's/^vocab_size=//p' "$data/vocab.ini")

shoal_run () {  # shoal_run CELL STEPS WS [more -o]: one run
  local cell=$1 steps=$2 ws=$3; shift 3
  rm -rf "$ws"
  "$BUILD/shoal" run examples/char-rnn/char_rnn.conf -q -o "layer data.data=$data" \
    -o "layer embed.vocab_size=$vocab" -o "layer logits.num_output=$vocab" -o "layer gru.type=$cell" \
    -o job.epochs=0 -o "job.train_steps=$steps" -o job.test_freq=0 -o "job.disp_freq=$WINDOW" \
    -o job.checkpoint_freq=0 -o "job.threads=$THREADS" "$@" --workspace "$ws" >/dev/null 2>&1
}
torch_run () {  # torch_run CELL STEPS [flags]
  local cell=$1 steps=$2; shift 2
  "$PY" bench/rnn_torch.py --cell "$cell" --threads "$THREADS" --steps "$steps" --window "$WINDOW" "$@"
}
field () { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p" | head -n 1; }
blob_tool=$OUT/params_blob
# shellcheck disable=SC2046  # pkg-config prints several flags
"${CC:-cc}" -std=c11 -O2 -D_GNU_SOURCE -Isrc -Iinclude -I"$BUILD/gen" \
  $(pkg-config --cflags glib-2.0 gthread-2.0 gobject-2.0 gmodule-2.0 thrift_c_glib lmdb openblas zlib json-glib-1.0) \
  bench/params_blob.c -o "$blob_tool" "$BUILD/libshoal.a" \
  $(pkg-config --libs glib-2.0 gthread-2.0 gobject-2.0 gmodule-2.0 thrift_c_glib lmdb openblas zlib json-glib-1.0) \
  -lm -lpthread || die "cannot build $blob_tool"

shoal_rate () {  # median window rate after the warm-up windows
  /usr/bin/python3 - "$1" "$((WARMUP / WINDOW))" <<'PY'
import json, statistics, sys
r = [json.loads(l) for l in open(sys.argv[1])]
s = [x["samples_per_sec"] for x in r if x["phase"] == "train"][int(sys.argv[2]):]
print(f"{statistics.median(s):.2f}" if s else "-")
PY
}

printf '%-5s %-22s %-22s %-6s %-10s %-10s %s\n' cell "shoal seq/s" "torch seq/s" ratio "shoal val" "torch val" "val ratio"
for cell in $CELLS; do
  s_rates=() t_rates=()
  for r in $(seq "$REPEATS"); do
    shoal_run "$cell" $((WARMUP + STEPS)) "$OUT/ws-$cell" -o job.test_steps=1 || die "shoal run failed"
    s_rates+=("$(shoal_rate "$OUT/ws-$cell/metrics.jsonl")")
    line=$(torch_run "$cell" "$STEPS" --warmup "$WARMUP" --no-eval) || die "torch run failed"
    t_rates+=("$(field samples_per_sec "$line")")
  done
  s=$(printf '%s\n' "${s_rates[@]}" | median)
  t=$(printf '%s\n' "${t_rates[@]}" | median)
  # quality: the same initial weights (shoal's after a step at lr 0), the same steps,
  # the whole validation split
  shoal_run "$cell" 1 "$OUT/init-$cell" -o updater.lr=0 -o job.test_steps=1 || die "shoal run failed"
  "$blob_tool" "$OUT/init-$cell" "$OUT/init-$cell.bin" || die "no initial params"
  shoal_run "$cell" "$QUALITY" "$OUT/q-$cell" -o job.test_steps=0 || die "shoal run failed"
  sv=$(grep '"phase":"test"' "$OUT/q-$cell/metrics.jsonl" | tail -1 | sed 's/.*"loss":\([^,}]*\).*/\1/')
  line=$(torch_run "$cell" "$QUALITY" --warmup 0 --window 10 --init-from "$OUT/init-$cell.bin") \
    || die "torch run failed"
  tv=$(field val_loss "$line")
  printf '%-5s %-22s %-22s %-6s %-10s %-10s %s\n' "$cell" "$s [$(printf '%s ' "${s_rates[@]}")]" \
    "$t [$(printf '%s ' "${t_rates[@]}")]" "$(awk -v a="$s" -v b="$t" 'BEGIN { printf "%.2f", a / b }')" \
    "$sv" "$tv" "$(awk -v a="$sv" -v b="$tv" 'BEGIN { printf "%.3f", a / b }')"
done
echo "(2-level $THREADS-thread runs of 32 x 100 bytes; val: mean loss per byte after $QUALITY steps from the same initial weights, whole validation split)"
