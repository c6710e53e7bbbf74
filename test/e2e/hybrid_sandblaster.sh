#!/usr/bin/env bash
# The hybrid LeNet (conv/pool split by batch, dense layers by feature
# among the 2 workers of the group) trains under Sandblaster - a server
# process apart, over Thrift - to the CNN's bar: >= 0.89 in 3 epochs.
set -euo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
ws=$(mktemp -d)
trap 'rm -rf "$ws"' EXIT
timeout -k 10 "$(scaled 400)" "$build/shoal" run examples/fashion-mnist/hybrid.conf --topology conf/sandblaster.conf \
  -q --workspace "$ws" | tee "$ws/out"
acc=$(sed -n 's/^final test accuracy: //p' "$ws/out")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.89) }' || { echo "accuracy $acc below the bar 0.89"; exit 1; }
