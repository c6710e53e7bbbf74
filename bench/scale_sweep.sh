#!/usr/bin/env bash
# A scale sweep's cost (docs/SCALE.md, "A sweep's cost"): the four SINGA
# schemes at 1, 2, 4, ... 256 workers, 180,000 samples a point, the MLP on
# the virtual clock with this machine's calibration and 10 Gbit/s NICs,
# `shoal compare --workers` with its default --jobs (the cores).  Prints
# the wall time against the issue's bar of 20 minutes and the machine's
# load while it ran (other jobs share the cores).
#   bench/scale_sweep.sh [BUILD]    WORKERS=1,2,4 SAMPLES=N for a smaller one,
#                                   CAL=FILE to reuse a calibration (then
#                                   the same command repeats exactly)
set -euo pipefail
# shellcheck source=bench/scale_lib.sh
. "$(dirname "$0")/scale_lib.sh"
WORKERS=${WORKERS:-1,2,4,8,16,32,64,128,256}
SAMPLES=${SAMPLES:-180000}
OUT=${OUT:-$BUILD/scale-sweep}
if [ -n "${CAL:-}" ]; then
  [ -f "$CAL" ] || { echo "no calibration $CAL (CAL)" >&2; exit 1; }
  case $CAL in "$OUT"/*) echo "CAL=$CAL is under $OUT, which the sweep replaces: copy it elsewhere" >&2; exit 1 ;; esac
fi
rm -rf "$OUT"
mkdir -p "$OUT"
echo "$(scale_machine); load $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${CAL:-}" ]; then
  echo "calibration: $CAL (CAL, not measured again)"
else
  CAL=$OUT/mlp.cal
  scale_calibrate "$CAL"
fi
scale_cluster "$CAL"
start=$SECONDS
"$BUILD/shoal" compare "${JOB[@]}" --schemes sandblaster,allreduce,downpour,hogwild --workers "$WORKERS" \
  --budget "samples=$SAMPLES" "${CLUSTER[@]}" --out "$OUT/sweep" --quiet >"$OUT/sweep.log" 2>&1 \
  || { tail -5 "$OUT/sweep.log"; echo "the sweep failed" >&2; exit 1; }
wall=$((SECONDS - start))
echo "sweep: workers $WORKERS x 4 schemes, $SAMPLES samples a point: ${wall} s wall, load after $(cut -d' ' -f1-3 /proc/loadavg)"
echo "sweep / 20 minutes: $(awk -v w="$wall" 'BEGIN { printf "%.2f", w / 1200 }') (at most 1.00)"
