#!/usr/bin/env bash
# The DBN example (examples/dbn) on a short run: four RBMs (784-1000-500-
# 250-30) pre-trained one after the other by CD-1, each reading the one
# below through the encoder it took by init_from, then the autoencoder
# unrolled from them and fine-tuned by back-propagation; the same
# autoencoder from random init, the same steps, ends with a higher
# reconstruction loss.  Also: the first RBM's reconstruction error falls.
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
short=(-o job.epochs=0 -o job.test_freq=0 -o job.test_steps=10 -o job.disp_freq=25 -q)

value () {  # value FILE PHASE first|last: the loss of the first or last line of the phase
  grep "\"phase\":\"$2\"" "$1" | { if [ "$3" = first ]; then head -1; else tail -1; fi; } \
    | sed 's/.*"loss":\([^,}]*\).*/\1/'
}

start=$SECONDS
prev=
for i in 1 2 3 4; do
  init=()
  [ -n "$prev" ] && init=(-o "job.init_from=$prev")
  "$build/shoal" run "examples/dbn/rbm$i.conf" "${short[@]}" -o job.train_steps=100 "${init[@]}" \
    --workspace "$dir/rbm$i" >/dev/null
  echo "rbm$i: reconstruction error $(value "$dir/rbm$i/metrics.jsonl" train first) -> $(value "$dir/rbm$i/metrics.jsonl" train last), test $(value "$dir/rbm$i/metrics.jsonl" test last)"
  prev=$dir/rbm$i
done
first=$(value "$dir/rbm1/metrics.jsonl" train first)
last=$(value "$dir/rbm1/metrics.jsonl" train last)
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.7 * a) }' || { echo "rbm1's error did not fall: $first -> $last"; exit 1; }

ae=(-o job.train_steps=150)
"$build/shoal" run examples/dbn/autoencoder.conf "${short[@]}" "${ae[@]}" \
  -o "job.init_from=$dir/rbm1, $dir/rbm2, $dir/rbm3, $dir/rbm4" --workspace "$dir/pre" >/dev/null
"$build/shoal" run examples/dbn/autoencoder.conf "${short[@]}" "${ae[@]}" -o job.init_from= \
  --workspace "$dir/random" >/dev/null
pre=$(value "$dir/pre/metrics.jsonl" test last)
random=$(value "$dir/random/metrics.jsonl" test last)
echo "autoencoder after 150 steps: pre-trained $pre, random init $random ($((SECONDS - start)) s in all)"
awk -v a="$pre" -v b="$random" 'BEGIN { exit !(a < 0.85 * b) }' || { echo "pre-training did not help"; exit 1; }
