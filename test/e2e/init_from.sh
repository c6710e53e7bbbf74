#!/usr/bin/env bash
# A checkpoint initialises another job's layers by name (pre-training):
# a job with the same layers, init_from the first job's workspace and a
# learning rate of 0, tests exactly as the first job ended.  A layer of
# another shape is refused with a message naming the param.
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
small=(-o job.epochs=0 -o job.test_freq=0 -o 'layer fc1.num_output=64' -o 'layer fc2.num_output=64' -q)

"$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" -o job.train_steps=100 \
  --workspace "$dir/pre" | tail -1 >"$dir/pre.acc"
"$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" -o job.train_steps=1 \
  -o updater.lr_list=0,0 -o "job.init_from=$dir/pre" --workspace "$dir/next" | tail -1 >"$dir/next.acc"
echo "pre-trained: $(cat "$dir/pre.acc"); initialised from it: $(cat "$dir/next.acc")"
cmp "$dir/pre.acc" "$dir/next.acc"

status=0
"$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" -o job.train_steps=1 \
  -o 'layer fc2.num_output=32' -o "job.init_from=$dir/pre" --workspace "$dir/bad" 2>"$dir/err" >/dev/null \
  || status=$?
[ "$status" -ne 0 ]
grep -q "init_from: param fc2/weight is 64x64 in $dir/pre but 32x64 here" "$dir/err" || { cat "$dir/err"; exit 1; }
