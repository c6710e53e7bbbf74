#!/usr/bin/env bash
# A scale sweep's cost (docs/SCALE.md, "A sweep's cost"): the four SINGA
# schemes at 1, 2, 4, ... 256 workers, 180,000 samples a point, the MLP on
# the virtual clock with this machine's calibration and 10 Gbit/s NICs,
# `shoal compare --workers` with its default --jobs (the cores).  Prints
# the wall time against the issue's bar of 20 minutes and the machine's
# load while it ran (other jobs share the cores).
#   bench/scale_sweep.sh [BUILD]    WORKERS=1,2,4 SAMPLES=N for a smaller one
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/.."
WORKERS=${WORKERS:-1,2,4,8,16,32,64,128,256}
SAMPLES=${SAMPLES:-180000}
OUT=${OUT:-$BUILD/scale-sweep}
rm -rf "$OUT"
mkdir -p "$OUT"
[ -d "$BUILD/data/fashion-mnist/train" ] || { echo "no $BUILD/data/fashion-mnist: run make data" >&2; exit 1; }
JOB=(examples/fashion-mnist/mlp.conf -o "layer data.train=$BUILD/data/fashion-mnist/train"
     -o "layer data.test=$BUILD/data/fashion-mnist/test" -o job.threads=1)
echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); load $(cut -d' ' -f1-3 /proc/loadavg)"
"$BUILD/shoal" calibrate "${JOB[@]}" --out "$OUT/mlp.cal" | head -1
start=$SECONDS
"$BUILD/shoal" compare "${JOB[@]}" --schemes sandblaster,allreduce,downpour,hogwild --workers "$WORKERS" \
  --budget "samples=$SAMPLES" -o emulate.clock=virtual -o "emulate.calibration=$OUT/mlp.cal" \
  -o emulate.nic_mbit=10000 -o emulate.latency_ms=0.05 --out "$OUT/sweep" --quiet >"$OUT/sweep.log" 2>&1 \
  || { tail -5 "$OUT/sweep.log"; echo "the sweep failed" >&2; exit 1; }
wall=$((SECONDS - start))
echo "sweep: workers $WORKERS x 4 schemes, $SAMPLES samples a point: ${wall} s wall, load after $(cut -d' ' -f1-3 /proc/loadavg)"
echo "sweep / 20 minutes: $(awk -v w="$wall" 'BEGIN { printf "%.2f", w / 1200 }') (at most 1.00)"
