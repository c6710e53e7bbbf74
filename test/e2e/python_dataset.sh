#!/usr/bin/env bash
# Datasets shared with programs that are not shoal: Python's own LMDB and
# Thrift libraries (examples/python-dataset/shoal_records.py) read what
# `shoal import` wrote, record for record, and write datasets shoal trains
# on: Fashion-MNIST's test images written by Python train exactly as
# shoal's own import of them does (the same losses to the last digit), and
# float records of Gaussian blobs train a classifier past a bar.
set -euo pipefail
build=${1:-build}
fail() { echo "FAIL: $*"; exit 1; }
py=(/usr/bin/python3 -I examples/python-dataset/shoal_records.py)
if ! /usr/bin/python3 -I -c 'import lmdb, thrift.TSerialization' 2>/dev/null; then
  echo "SKIP: Debian's python3-lmdb and python3-thrift are needed (make deps installs them)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fm=/usr/share/datasets/fashion-mnist
[ -d "$build/data/fashion-mnist/test" ] || fail "no $build/data/fashion-mnist/test: run make data"

# Python reads shoal's records: labels and pixels as the IDX files hold them
"${py[@]}" idx "$dir/py-test" --images $fm/t10k-images-idx3-ubyte.gz --labels $fm/t10k-labels-idx1-ubyte.gz
"${py[@]}" dump "$build/data/fashion-mnist/test" --first 10000 >"$dir/shoal.dump"
"${py[@]}" dump "$dir/py-test" --first 10000 >"$dir/py.dump"
[ "$(wc -l <"$dir/shoal.dump")" -eq 10000 ] || fail "Python read $(wc -l <"$dir/shoal.dump") of shoal's 10000 records"
cmp -s "$dir/shoal.dump" "$dir/py.dump" || { diff "$dir/shoal.dump" "$dir/py.dump" | sed -n 1,6p; fail "records differ"; }

# shoal trains on Python's records as on its own
small=(-o job.epochs=0 -o job.train_steps=60 -o job.test_freq=0 -o job.disp_freq=20 -o job.test_steps=20
       -o 'layer fc1.num_output=64' -o 'layer fc2.num_output=64')
for src in own py; do
  data=$build/data/fashion-mnist/test
  [ "$src" = py ] && data=$dir/py-test
  "$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" -o "layer data.train=$data" \
    -o "layer data.test=$data" --workspace "$dir/ws-$src" >"$dir/$src.out" 2>&1 || { cat "$dir/$src.out"; fail "training on $src records"; }
  grep -o '"step":[0-9]*,.*"loss":[-0-9.e]*' "$dir/ws-$src/metrics.jsonl" | sed 's/"time":[0-9.e-]*,//' >"$dir/$src.loss"
done
[ -s "$dir/own.loss" ] || fail "no loss lines"
cmp -s "$dir/own.loss" "$dir/py.loss" || { paste "$dir/own.loss" "$dir/py.loss" | sed -n 1,4p; fail "losses differ"; }

# float records written by Python
"${py[@]}" blobs "$dir/blobs/train" --count 3000 --seed 1
"${py[@]}" blobs "$dir/blobs/test" --count 600 --seed 2
"$build/shoal" run examples/python-dataset/blobs.conf -o "layer data.train=$dir/blobs/train" \
  -o "layer data.test=$dir/blobs/test" --workspace "$dir/ws-blobs" >"$dir/blobs.out" 2>&1 || { cat "$dir/blobs.out"; fail "training on blobs"; }
acc=$(sed -n 's/^final test accuracy: //p' "$dir/blobs.out")
echo "blobs: test accuracy $acc"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.75) }' || fail "blobs test accuracy $acc < 0.75"
echo "PASS"
