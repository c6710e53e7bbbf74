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

# a params file in shoal/param.h's layout, written by another program
# (Python's struct here, as weights exported from PyTorch would be): every
# weight zero and fc3's bias one-hot at class 3, so every test image is
# called 3 and the test accuracy is that class's share, 1000 of 10000
/usr/bin/python3 - "$dir/onehot.params" <<'PY'
import struct, sys
params = [("fc1/weight", (64, 784)), ("fc1/bias", (64,)), ("fc2/weight", (64, 64)),
          ("fc2/bias", (64,)), ("fc3/weight", (10, 64)), ("fc3/bias", (10,))]
with open(sys.argv[1], "wb") as f:
    f.write(b"SHOALPRM" + struct.pack("<II", 1, len(params)))
    for name, shape in params:
        n = 1
        for d in shape:
            n *= d
        values = [1.0 if name == "fc3/bias" and i == 3 else 0.0 for i in range(n)]
        f.write(struct.pack("<I", len(name)) + name.encode() + struct.pack("<I", len(shape)))
        f.write(struct.pack("<%di" % len(shape), *shape) + struct.pack("<Q", n))
        f.write(struct.pack("<%df" % n, *values))
PY
"$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" -o job.train_steps=1 \
  -o updater.lr_list=0,0 -o "job.init_from=$dir/onehot.params" --workspace "$dir/file" >"$dir/file.out"
tail -1 "$dir/file.out"
grep -qx "final test accuracy: 0.1000" "$dir/file.out" || { cat "$dir/file.out"; echo "init_from a params file: expected accuracy 0.1000"; exit 1; }
echo "init_from a params file: ok"
