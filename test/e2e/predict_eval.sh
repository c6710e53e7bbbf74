#!/usr/bin/env bash
# A trained model on new data: `shoal eval` prints the run's own final
# test numbers for the same data and params; `shoal predict` writes one
# row per test sample whose accuracy is the run's final test accuracy;
# both read a CSV too (pixel values, read as the training images); and
# bad input - another model's checkpoint, a missing workspace, a bad
# --top-k, a conf without a test set to point at - is a clear error.
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
small=(-o job.epochs=0 -o job.test_freq=0 -o 'layer fc1.num_output=64' -o 'layer fc2.num_output=64' -q)
fail() { echo "FAIL: $*"; exit 1; }

"$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" -o job.train_steps=200 \
  --workspace "$dir/ws" >"$dir/run.out"
acc=$(sed -n 's/^final test accuracy: //p' "$dir/run.out")
[ -n "$acc" ] || fail "no final accuracy"
# the run's final test line, as metrics.jsonl has it (loss to 6 digits)
loss=$(python3 -c "
import json
recs=[json.loads(l) for l in open('$dir/ws/metrics.jsonl') if '\"test\"' in l]
print('%.6f' % recs[-1]['loss'])")

"$build/shoal" eval "$dir/ws/job.conf" --from "$dir/ws" >"$dir/eval.out"
cat "$dir/eval.out"
grep -qx "samples: 10000" "$dir/eval.out" || fail "eval did not test 10000 samples"
grep -qx "test accuracy: $acc" "$dir/eval.out" || fail "eval accuracy differs from the run's $acc"
grep -qx "test loss: $loss" "$dir/eval.out" || fail "eval loss differs from the run's $loss"

"$build/shoal" predict "$dir/ws/job.conf" --from "$dir/ws" --out "$dir/pred.csv" -k 2 >"$dir/predict.out"
cat "$dir/predict.out"
grep -qx "accuracy: $acc" "$dir/predict.out" || fail "predict accuracy differs from the run's $acc"
[ "$(head -1 "$dir/pred.csv")" = "sample,label,predicted,top1,p1,top2,p2" ] || fail "header: $(head -1 "$dir/pred.csv")"
[ "$(wc -l <"$dir/pred.csv")" -eq 10001 ] || fail "not one row per sample"
# every row: the predicted label is top1, probabilities ordered and in [0, 1]
awk -F, 'NR > 1 && ($3 != $4 || $5 < $7 || $5 > 1 || $7 < 0) { print "bad row " NR ": " $0; bad = 1 }
         END { exit bad }' "$dir/pred.csv" || fail "rows"
# the C API's share of the work: the row count agrees with the recount
right=$(awk -F, 'NR > 1 && $2 == $3 { n++ } END { print n }' "$dir/pred.csv")
python3 -c "import sys; sys.exit(0 if '%.4f' % ($right / 10000) == '$acc' else 1)" || fail "recount $right"

# a CSV of the first 100 test images (label, then 784 pixel values)
python3 - "$dir/small.csv" <<'PY'
import gzip, sys
img = gzip.open('/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz'); img.read(16)
lab = gzip.open('/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz'); lab.read(8)
pixels, labels = img.read(784 * 100), lab.read(100)
with open(sys.argv[1], 'w') as out:
    for i in range(100):
        out.write(','.join([str(labels[i])] + [str(b) for b in pixels[i * 784:(i + 1) * 784]]) + '\n')
PY
"$build/shoal" predict "$dir/ws/job.conf" --from "$dir/ws" --data "$dir/small.csv" --out "$dir/csv.csv" >/dev/null
# the CSV's rows are the first 100 rows of the LMDB test set: same predictions
diff <(head -101 "$dir/pred.csv" | cut -d, -f1-3) <(head -101 "$dir/csv.csv" | cut -d, -f1-3) \
  || fail "CSV predictions differ from the dataset's"
"$build/shoal" eval "$dir/ws/job.conf" --from "$dir/ws" --data "$dir/small.csv" | grep -qx "samples: 100" \
  || fail "eval on the CSV"
# the same CSV without its labels (issue 23: "accuracy: 0.0000"): no accuracy is made up
cut -d, -f2- "$dir/small.csv" >"$dir/nolabels.csv"
"$build/shoal" predict "$dir/ws/job.conf" --from "$dir/ws" --data "$dir/nolabels.csv" --label-column -1 \
  --out "$dir/nolab.csv" >"$dir/nolab.out"
grep -qx "no labels in the data: no accuracy" "$dir/nolab.out" || { cat "$dir/nolab.out"; fail "predict without labels"; }
grep -q "^accuracy" "$dir/nolab.out" && fail "an accuracy without labels"
diff <(cut -d, -f3 "$dir/csv.csv") <(cut -d, -f3 "$dir/nolab.csv") >/dev/null || fail "predictions differ without labels"
ls /tmp | grep -q '^shoal-data-' && fail "a temporary dataset was left in /tmp" || true

expect_error() {
  local want=$1; shift
  local rc=0
  "$@" >"$dir/out" 2>"$dir/err" || rc=$?
  [ "$rc" -ne 0 ] || fail "'$*' succeeded"
  grep -qF -- "$want" "$dir/err" || { cat "$dir/err"; fail "'$*': no '$want'"; }
}
expect_error "shoal predict: param fc1/weight is 64x784 in $dir/ws but 32x784 here" \
  "$build/shoal" predict "$dir/ws/job.conf" --from "$dir/ws" -o 'layer fc1.num_output=32'
expect_error "shoal eval: $dir/none: no such workspace or params file" \
  "$build/shoal" eval "$dir/ws/job.conf" --from "$dir/none"
expect_error "shoal predict: --top-k must be 1 to 1000, got 0" \
  "$build/shoal" predict "$dir/ws/job.conf" --from "$dir/ws" -k 0
expect_error "shoal predict: expected JOB.conf and --from WORKSPACE" "$build/shoal" predict "$dir/ws/job.conf"
mkdir "$dir/empty"
expect_error "shoal eval: $dir/empty/checkpoint/rank-0: no checkpoint here" "$build/shoal" eval "$dir/ws/job.conf" --from "$dir/empty"

# the workspace travels: from another folder its job.conf names the same
# data (the conf as run holds the dataset paths made absolute)
grep -q "^train=/" "$dir/ws/job.conf" || { cat "$dir/ws/job.conf"; fail "job.conf keeps a relative dataset path"; }
build_abs=$(cd "$build" && pwd)
(cd "$dir/empty" && "$build_abs/shoal" eval ../ws/job.conf --from ../ws) >"$dir/away.out" \
  || fail "eval of the workspace from another folder"
grep -qx "test accuracy: $acc" "$dir/away.out" || fail "eval from another folder: another accuracy"

# another model's conf: the params hold layers this net has not, named;
# --partial loads by name what both have and says nothing of the rest
sed -e '/^\[layer fc2\]/,/^$/d' -e '/^\[layer relu2\]/,/^$/d' -e 's/^src = relu2$/src = relu1/' \
  examples/fashion-mnist/mlp.conf >"$dir/short.conf"
expect_error "shoal eval: $dir/ws holds 2 params this net has not (fc2/weight, fc2/bias): they are another model's" \
  "$build/shoal" eval "$dir/short.conf" -o 'layer fc1.num_output=64' --from "$dir/ws"
"$build/shoal" eval "$dir/short.conf" -o 'layer fc1.num_output=64' --from "$dir/ws" --partial >"$dir/partial.out" \
  || fail "eval --partial"
grep -q "^test accuracy: " "$dir/partial.out" || fail "eval --partial printed no accuracy"
echo "predict and eval ok (accuracy $acc, loss $loss)"
