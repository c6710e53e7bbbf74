#!/usr/bin/env bash
# End to end: the LeNet example trains on a subset (300 steps, 3,200 test
# images) to an accuracy bar.
set -euo pipefail
build=${1:-build}
ws=$(mktemp -d)
trap 'rm -rf "$ws"' EXIT

"$build/shoal" run examples/fashion-mnist/cnn.conf -o job.epochs=0 -o job.train_steps=300 \
  -o job.test_freq=0 -o job.test_steps=50 -o job.disp_freq=100 --workspace "$ws" | tee "$ws/out"

acc=$(sed -n 's/^final test accuracy: //p' "$ws/out")
echo "accuracy $acc"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || { echo "accuracy $acc below the bar 0.80"; exit 1; }
