#!/usr/bin/env bash
# Bad input to `shoal run` gets a clear message naming the place and a
# non-zero exit, never a crash; a failed run leaves an existing workspace's
# files alone.
set -uo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
shoal="$build/shoal"
failures=0

# expect STATUS 'MESSAGE' ARGS...: runs shoal, checks exit status and stderr
expect() {
  local want_status=$1 want_msg=$2
  shift 2
  "$shoal" "$@" >"$dir/out" 2>"$dir/err"
  local status=$?
  if [ "$status" -ne "$want_status" ] || ! grep -qF -- "$want_msg" "$dir/err"; then
    echo "FAIL: shoal $*"
    echo "  want exit $want_status and: $want_msg"
    echo "  got exit $status and: $(cat "$dir/err")"
    failures=$((failures + 1))
  else
    echo "ok: $want_msg"
  fi
}

base=examples/fashion-mnist/mlp.conf
sed 's/^type = relu$/type = reluu/' "$base" >"$dir/badtype.conf"
line=$(grep -n '^type = reluu' "$dir/badtype.conf" | head -1 | cut -d: -f1)
expect 1 "$dir/badtype.conf:$line: [layer relu1] type: unknown layer type 'reluu'" run "$dir/badtype.conf"

sed 's/^num_output = 1024$/num_output = ten/' "$base" >"$dir/nan.conf"
line=$(grep -n '^num_output = ten' "$dir/nan.conf" | head -1 | cut -d: -f1)
expect 1 "$dir/nan.conf:$line: [layer fc1] num_output: expected an integer, got 'ten'" run "$dir/nan.conf"

sed 's/^src = relu1$/src = relu9/' "$base" >"$dir/nosrc.conf"
expect 1 "[layer fc2] src: unknown source layer 'relu9'" run "$dir/nosrc.conf"

expect 1 "[layer data] train: " run "$base" -o "layer data.train=$dir/no-such-db"
expect 1 "-o updater.lr: [updater] lr: expected a number, got 'fast'" run "$base" -o updater.lr=fast
expect 1 "[updater] momentm: unknown key (did you mean 'momentum'?)" run "$base" -o updater.momentm=0.9
expect 1 "-o layer fc9.num_output: $base has no [layer fc9] (did you mean 'layer fc1.num_output'?)" run "$base" -o 'layer fc9.num_output=5'
expect 1 "[cluster] nworkers_per_procs" run "$base" -o cluster.nworkers_per_group=4 -o cluster.nworkers_per_procs=3
expect 1 "No such file" run "$dir/missing.conf"
expect 2 "expected one JOB.conf" run
expect 2 "unknown command 'rn'" rn

# data that does not fit: a dataset of 3 floats per record fed to LeNet's
# 5x5 convolution, and a dataset whose record does not decode
printf '1,0.5,0.2,0.1\n0,0.1,0.2,0.3\n' >"$dir/small.csv"
"$shoal" import csv --in "$dir/small.csv" --out "$dir/small" >/dev/null 2>&1
expect 1 "[layer conv1]" run examples/fashion-mnist/cnn.conf -o "layer data.train=$dir/small" \
  -o "layer data.test=$dir/small"
mkdir -p "$dir/garbage"
cp "$dir/small/data.mdb" "$dir/garbage/data.mdb"
# flip bytes inside the first record's value (LMDB stores it near the end of the first data page)
/usr/bin/python3 - "$dir/garbage/data.mdb" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
marker = data.find(b"0000000000")  # the first key; its value follows in the same leaf page
assert marker > 0
for i in range(marker + 10, min(marker + 40, len(data))):
    data[i] ^= 0x5A
open(path, "wb").write(data)
PY
expect 1 "key 0000000000" run examples/fashion-mnist/mlp.conf -o "layer data.train=$dir/garbage" \
  -o "layer data.test=$dir/small"

# a failed run does not touch what a workspace already holds
mkdir -p "$dir/ws"
echo '{"kept":true}' >"$dir/ws/metrics.jsonl"
"$shoal" run "$dir/badtype.conf" --workspace "$dir/ws" >/dev/null 2>&1
if ! grep -q kept "$dir/ws/metrics.jsonl"; then
  echo "FAIL: a run that failed validation overwrote metrics.jsonl"
  failures=$((failures + 1))
fi

# a refused run into a new folder leaves no empty workspace behind: one
# refused by the conf (before the net is built) and one whose net builds
# but has no data input (refused after the workspace folder was made)
"$shoal" run "$dir/badtype.conf" --workspace "$dir/new-ws1" >/dev/null 2>&1
printf '[job]\ntrain_steps = 2\n[layer x]\ntype = feed\nshape = 4, 3\n' >"$dir/noinput.conf"
expect 1 "the net has no data input layer" run "$dir/noinput.conf" --workspace "$dir/new-ws2"
for ws in new-ws1 new-ws2; do
  if [ -e "$dir/$ws" ]; then
    echo "FAIL: a refused run left the workspace folder $ws"
    failures=$((failures + 1))
  fi
done

[ "$failures" -eq 0 ]
